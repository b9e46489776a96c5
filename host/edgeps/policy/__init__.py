"""edgeps.policy."""
