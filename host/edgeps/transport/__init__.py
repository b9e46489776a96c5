"""edgeps.transport."""
