"""The benchmarks of `edgeps bench`: one module each, with ``configure`` and ``run``."""
