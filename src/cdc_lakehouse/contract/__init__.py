"""The landing contract (CONTRACT §2, §5) as code: where landing files go and how their values
are written (``landing``), the snapshot corrections' place and line schema (``corrections``), and
how files are published whole (``publication``). Capture, snapshot reconcile and housekeeping write
the landing through it, and the pipeline reads corrections with it; it imports nothing else of the
project (tests/test_import_layers.py).
"""
