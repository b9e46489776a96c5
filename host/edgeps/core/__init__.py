"""edgeps.core."""
