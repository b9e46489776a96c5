"""edgeps.boards."""
