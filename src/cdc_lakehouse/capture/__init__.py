"""Capture from live sources into landing files (CONTRACT §2).

* :mod:`ddl_postgres`, :mod:`ddl_mariadb` — shadow-table capture DDL (triggers, transaction
  table), and MariaDB binlog session markers;
* :mod:`shadow_export` — committed shadow rows to landing files, exactly once, purged once the
  lakehouse acknowledges them (:mod:`shadow_ledger`) or right after landing;
* :mod:`binlog` — a row-based binlog to landing files, resuming at transaction boundaries;
* :mod:`cli` — the ``capture`` commands (``add_capture_commands``).

See docs/capture.md.
"""
