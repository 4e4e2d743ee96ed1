"""Benchmarks and experiments behind ``bnnkit experiment ...`` and ``bnnkit bench ...``."""
