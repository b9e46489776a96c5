"""Seeing a run: the live state, a web dashboard, Prometheus metrics and plots."""
