"""Benchmarks of cdc-lakehouse: ``python -m bench --help`` (docs/benchmarks.md)."""
