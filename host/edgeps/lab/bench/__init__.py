"""edgeps.bench."""
