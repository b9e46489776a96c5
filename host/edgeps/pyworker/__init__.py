"""The CPython worker's parts: trainers over the C kernels and local training data."""
