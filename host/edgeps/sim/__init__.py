"""edgeps.sim."""
