"""Live end-to-end runs: schema + capture DDL, workload, capture, expected state.

    run = live_run(pg, maria, landing, seed=3, n_txns=60)
    run.landing                   # landing folder with every source below
    run.sources["pg_shop"]        # CapturedSource: kind, dialect, schema, workload result
    run.expected["pg_shop"]       # "schema.table" -> rows of SELECT * at the end

Sources: ``pg_shop`` (PostgreSQL shadow tables), ``maria_shop_shadow`` (MariaDB shadow tables),
``maria_shop`` (MariaDB binlog). The capture tools also run while the workload has
transactions open, so every source lands in several batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from cdc_lakehouse.capture import ddl_mariadb, ddl_postgres
from cdc_lakehouse.capture.binlog import BinlogConfig, capture
from cdc_lakehouse.capture.shadow_export import export_once
from cdc_lakehouse.capture.sqlquote import TableName

from . import workload as wl
from .workload import TABLES, WorkloadResult, run_workload  # noqa: F401  (re-exported)


@dataclass
class CapturedSource:
    source: str
    kind: str  # shadow | binlog
    dialect: str
    schema: str
    workload: WorkloadResult | None = None

    @property
    def keys(self) -> dict[str, list[str]]:
        return {f"{self.schema}.{t}": keys for t, (_, keys) in TABLES.items()}


@dataclass
class LiveRun:
    landing: Path
    sources: dict[str, CapturedSource] = field(default_factory=dict)
    expected: dict[str, dict[str, list[dict]]] = field(default_factory=dict)


def install_capture(server, dialect: str, schema: str, markers: bool = False) -> None:
    """Shadow capture on every workload table (and binlog session markers on MariaDB)."""
    conn = server.connect()
    try:
        if dialect == "postgres":
            conn.autocommit = True
            for table in TABLES:
                conn.execute(ddl_postgres.shadow_ddl(TableName(schema, table)))
            return
        with conn.cursor() as cur:
            for table, (cols, keys) in TABLES.items():
                name = TableName(schema, table)
                statements = ddl_mariadb.shadow_statements(name, [c for c, _ in cols], keys)
                if markers:
                    statements += ddl_mariadb.marker_statements(name)
                for statement in statements:
                    cur.execute(statement)
    finally:
        conn.close()


def select_all(server, dialect: str, schema: str) -> dict[str, list[dict]]:
    """Every workload table as ``SELECT *`` returns it, as dicts."""
    conn = server.connect()
    try:
        out = {}
        for table in TABLES:
            cur = conn.cursor()
            cur.execute(f"SELECT * FROM {wl.table_sql(dialect, schema, table)}")
            names = [d[0] for d in cur.description]
            out[f"{schema}.{table}"] = [dict(zip(names, r)) for r in cur.fetchall()]
        return out
    finally:
        conn.close()


def capture_all(pg, maria, landing: Path, schema: str = wl.SCHEMA) -> dict[str, CapturedSource]:
    """Run every capture tool once; each resumes where its last run stopped.

    Shadow exports purge right after landing: these runs have no housekeeping to acknowledge
    them, and the servers are shared, so rows left behind would land again in other tests'
    folders (their exports keep ledgers of their own)."""
    sources = {}
    if pg is not None:
        export_once(pg.dsn, landing, f"pg_{schema}", purge="on_landing")
        sources[f"pg_{schema}"] = CapturedSource(f"pg_{schema}", "shadow", "postgres", schema)
    if maria is not None:
        export_once(maria.dsn, landing, f"maria_{schema}_shadow", purge="on_landing")
        capture(BinlogConfig(host="127.0.0.1", port=maria.port, user="root", landing=landing,
                             source=f"maria_{schema}"))
        sources[f"maria_{schema}_shadow"] = CapturedSource(f"maria_{schema}_shadow", "shadow",
                                                           "mariadb", schema)
        sources[f"maria_{schema}"] = CapturedSource(f"maria_{schema}", "binlog", "mariadb", schema)
    return sources


def live_run(pg, maria, landing: Path, seed: int = 1, n_txns: int = 60,
             schema: str = wl.SCHEMA) -> LiveRun:
    """Set up, run the workload on both servers with captures in between, capture the rest."""
    run = LiveRun(Path(landing))
    results = {}
    for server, dialect in ((pg, "postgres"), (maria, "mariadb")):
        if server is None:
            continue
        conn = server.connect()
        if dialect == "postgres":
            conn.autocommit = True
        wl.setup_schema(conn, dialect, schema)
        conn.close()
        install_capture(server, dialect, schema, markers=dialect == "mariadb")
        def mid(s=server, d=dialect):
            return capture_all(s if d == "postgres" else None, s if d == "mariadb" else None, run.landing, schema)

        results[dialect] = run_workload(server, dialect, schema, seed, n_txns, on_step=mid)
    run.sources = capture_all(pg, maria, run.landing, schema)
    for name, src in run.sources.items():
        src.workload = results[src.dialect]
        run.expected[name] = select_all(pg if src.dialect == "postgres" else maria, src.dialect, schema)
    return run


# ------------------------------------------------------------------------------------------
# comparing replicas with SELECT *
# ------------------------------------------------------------------------------------------


def _canon(value, kind: str):
    if value is None:
        return None
    if kind == "dec":
        return Decimal(str(value)).quantize(Decimal("0.01"))
    if kind == "ts":
        if isinstance(value, str):
            value = datetime.fromisoformat(value.replace(" ", "T").rstrip("Z"))
        return value.replace(tzinfo=None)
    if kind == "int":
        return int(value)
    return value


def canonical(table: str, rows) -> list[tuple]:
    """Rows (replayed or selected) as sorted tuples of typed values, in column order."""
    cols = TABLES[table.split(".", 1)[1]][0]
    out = []
    for row in rows:
        assert set(row) == {c for c, _ in cols}, f"{table}: columns {sorted(row)}"
        out.append(tuple(_canon(row[c], kind) for c, kind in cols))
    return sorted(out, key=repr)
