"""Command-line interface: ``bnnkit demo`` and friends."""
