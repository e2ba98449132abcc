"""Live runs through the project pipeline: onboarding for the captured sources, a landing staged
in two deliveries (mid-workload and the rest), and the workload's per-transaction record that
gold is checked against.

    staged = staged_live_run(pg, maria, live_landing, pipe_landing, seed=5, n_txns=40)
    # pipe_landing holds what had landed mid-way through the MariaDB workload
    run_project(...)                       # first pipeline update
    deliver_rest(live_landing, pipe_landing)
    run_project(...)                       # second, incremental update
    staged.run                             # the harness' LiveRun (expected SELECT *, sources)
    staged.commits["mariadb"]              # committed transactions in commit order

Nothing here changes how ``harness.live_run`` works; :func:`staged_live_run` is the same
sequence (schema, capture DDL, workload with captures in between, final capture, SELECT *) with
a recording workload and one copy of the landing folder taken mid-way.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import yaml

from cdc_lakehouse.capture.state import STATE_FOLDER

from . import harness
from . import workload as wl
from .workload import TABLES, Workload

INTERNAL = ["__op", "__sequence", "__commit_ts", "__txn_id"]


# ------------------------------------------------------------------------------------------
# the workload, with what every committed transaction did
# ------------------------------------------------------------------------------------------


@dataclass
class Commit:
    """One committed workload transaction: who, and per (table, key) the row before the
    transaction and after it (None: absent)."""

    no: int
    user: str
    role: str | None
    before: dict[tuple[str, tuple], dict | None]
    after: dict[tuple[str, tuple], dict | None]


class RecordingWorkload(Workload):
    """The harness workload, also keeping every commit (in commit order) with its net effect."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.commits: list[Commit] = []

    def _end(self, user: str) -> None:
        txn = self.open[user]
        before = {(t, k): self.state[t].get(k) for (t, k) in txn.changes}
        super()._end(user)
        if txn.no in self.result.identities:
            after = {(t, k): (None if row is None else dict(row)) for (t, k), row in txn.changes.items()}
            self.commits.append(Commit(txn.no, txn.user, txn.role,
                                       {k: (None if v is None else dict(v)) for k, v in before.items()},
                                       after))


def state_after(commits: list[Commit], numbers: set[int]) -> dict[str, dict[tuple, dict]]:
    """The source tables after the committed transactions ``numbers`` (in commit order)."""
    state: dict[str, dict[tuple, dict]] = {t: {} for t in TABLES}
    for c in commits:
        if c.no not in numbers:
            continue
        for (table, key), row in c.after.items():
            if row is None:
                state[table].pop(key, None)
            else:
                state[table][key] = row
    return state


def net_changes(commit: Commit) -> dict[tuple[str, tuple], str]:
    """(table, key) -> INSERT/UPDATE/DELETE: the net change of each row the transaction left
    changed (CONTRACT §3; a key change is a DELETE of the old key and an INSERT of the new one)."""
    out = {}
    for tk, after in commit.after.items():
        before = commit.before[tk]
        if before is None and after is None:
            continue  # inserted and deleted again
        if before is None:
            out[tk] = "INSERT"
        elif after is None:
            out[tk] = "DELETE"
        elif before != after:
            out[tk] = "UPDATE"
    return out


# ------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------


@dataclass
class StagedRun:
    run: harness.LiveRun
    commits: dict[str, list[Commit]] = field(default_factory=dict)  # dialect -> commits
    staged_after: dict[str, int] = field(default_factory=dict)  # dialect -> commits before the copy
    first_delivery: list[Path] = field(default_factory=list)  # landing files of the copy (relative)


def copy_landing(live: Path, pipe: Path) -> list[Path]:
    """Deliver to ``pipe`` every landing file of ``live`` it does not have yet (capture state
    folders stay behind). Landing files are immutable once published, so a copy is a delivery."""
    copied = []
    for path in sorted(live.rglob("*")):
        rel = path.relative_to(live)
        if path.is_dir() or STATE_FOLDER in rel.parts or path.name.startswith("."):
            continue
        target = pipe / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied.append(rel)
    return copied


def staged_live_run(pg, maria, live: Path, pipe: Path, seed: int = 1, n_txns: int = 40,
                    schema: str = wl.SCHEMA) -> StagedRun:
    """``harness.live_run`` on ``live``; once the MariaDB workload has begun about half its
    transactions (PostgreSQL's is done, its last batch not yet captured), right after a capture,
    the landing is copied to ``pipe``: the first delivery of the pipeline."""
    run = harness.LiveRun(Path(live))
    staged = StagedRun(run)
    results = {}
    for server, dialect in ((pg, "postgres"), (maria, "mariadb")):
        conn = server.connect()
        if dialect == "postgres":
            conn.autocommit = True
        wl.setup_schema(conn, dialect, schema)
        conn.close()
        harness.install_capture(server, dialect, schema, markers=dialect == "mariadb")
        holder: dict = {}

        def step(s=server, d=dialect, h=holder):
            harness.capture_all(s if d == "postgres" else None, s if d == "mariadb" else None,
                                run.landing, schema)
            work = h["workload"]
            if d == "mariadb" and not staged.staged_after and work.next_txn > n_txns // 2:
                staged.first_delivery = copy_landing(run.landing, Path(pipe))
                staged.staged_after = {"postgres": len(staged.commits["postgres"]),
                                       "mariadb": len(work.commits)}

        work = RecordingWorkload(server, dialect, schema, seed, n_txns, on_step=step)
        holder["workload"] = work
        results[dialect] = work.run()
        staged.commits[dialect] = work.commits
    assert staged.staged_after, "the MariaDB workload never reached its middle with a capture"
    run.sources = harness.capture_all(pg, maria, run.landing, schema)
    for name, src in run.sources.items():
        src.workload = results[src.dialect]
        run.expected[name] = harness.select_all(pg if src.dialect == "postgres" else maria, src.dialect, schema)
    return staged


# ------------------------------------------------------------------------------------------
# onboarding
# ------------------------------------------------------------------------------------------


def table_slug(table: str) -> str:
    """A table name usable in a lake table name (the hostile one has quotes and spaces)."""
    return re.sub(r"[^a-z0-9]+", "_", table.lower()).strip("_")


def gold_table(source: str, table: str) -> str:
    return f"{source}_{table_slug(table)}"


def onboarding_flows(sources: dict[str, harness.CapturedSource], scd2: tuple[str, ...] = ()) -> list[dict]:
    """One flow per workload table per source; ``scd2``: tables that also keep an SCD2 history."""
    flows = []
    for s_index, (name, src) in enumerate(sorted(sources.items()), start=1):
        for t_index, (table, (_, keys)) in enumerate(TABLES.items(), start=1):
            flows.append({
                "data_flow_id": f"{s_index}{t_index:02d}",
                "data_flow_group": "live",
                "source_system": "PostgreSQL" if src.dialect == "postgres" else "MariaDB",
                "source_format": "cloudFiles",
                "source_details": {"source_database": src.schema, "source_table": table},
                "bronze_database_dev": "bronze",
                "bronze_table": (f"{name}_binlog_events" if src.kind == "binlog"
                                 else f"{name}_shadow_{table_slug(table)}"),
                "bronze_reader_options": {"cloudFiles.format": "json",
                                          "cloudFiles.rescuedDataColumn": "_rescued_data"},
                "silver_database_dev": "silver",
                "silver_table": gold_table(name, table),
                "silver_cdc_apply_changes": {
                    "keys": list(keys), "sequence_by": "__sequence",
                    "scd_type": "2" if table in scd2 else "1",
                    "apply_as_deletes": "__op = 'DELETE'", "except_column_list": INTERNAL,
                },
                "cdc_lakehouse": {"capture": src.kind, "source": name},
            })
    return flows


def write_onboarding(path: Path, sources: dict[str, harness.CapturedSource], **kw) -> Path:
    path.write_text(yaml.safe_dump(onboarding_flows(sources, **kw), allow_unicode=True, sort_keys=False))
    return path


# ------------------------------------------------------------------------------------------
# reading gold back
# ------------------------------------------------------------------------------------------


@dataclass
class GoldSource:
    """What gold shows of one source after an update, collected to the driver."""

    replicas: dict[str, list[dict]]  # "schema.table" -> rows (values as Spark gives them)
    types: dict[str, dict[str, str]]  # "schema.table" -> column -> Spark SQL type
    audit: list[dict]  # gold.audit_log rows of the source
    watermark: dict | None  # gold.replication_watermark row of the source


def timestamps_as_text(df):
    """Timestamps as ISO text in the session time zone (UTC), not as local Python datetimes."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType, TimestampType

    cols = [F.date_format(F.col(f"`{f.name}`"), "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").alias(f.name)
            if isinstance(f.dataType, TimestampType | TimestampNTZType) else F.col(f"`{f.name}`")
            for f in df.schema.fields]
    return df.select(*cols)


def read_gold(store, sources: dict[str, harness.CapturedSource]) -> dict[str, GoldSource]:
    """Gold replicas, audit log and watermark of every source, as plain Python values."""
    from pyspark.sql import functions as F

    audit = store.read("gold.audit_log").select(
        "source", "schema", "table", "key_values", "operation", "txn_id", "user", "role",
        "before", "after", "changed_columns", F.col("sequence.position").alias("position"),
        F.col("sequence.txn").alias("sequence_txn"))
    audit_rows = [r.asDict(recursive=True) for r in audit.collect()]
    marks = {r["source"]: r.asDict(recursive=True) for r in store.read("gold.replication_watermark").collect()}
    out = {}
    for name, src in sources.items():
        replicas, types = {}, {}
        for table in TABLES:
            gold = f"gold.{gold_table(name, table)}"
            qualified = f"{src.schema}.{table}"
            if not store.exists(gold):
                replicas[qualified], types[qualified] = None, {}
                continue
            df = store.read(gold)
            types[qualified] = {f.name: f.dataType.simpleString() for f in df.schema.fields}
            replicas[qualified] = [r.asDict() for r in timestamps_as_text(df).collect()]
        out[name] = GoldSource(replicas, types, [r for r in audit_rows if r["source"] == name],
                               marks.get(name))
    return out


def key_of(table: str, values: dict) -> tuple:
    """A row's key as the workload writes it (ints), from a row or a key map of text values."""
    cols = dict(TABLES[table][0])
    return tuple(int(values[k]) if cols[k] == "int" else values[k] for k in TABLES[table][1])


def marker_txns(audit: list[dict]) -> dict[int, str]:
    """workload txn_no -> transaction id, from the txlog row every transaction inserts."""
    out = {}
    for r in audit:
        if r["table"] == "txlog" and r["operation"] == "INSERT":
            no = int(r["key_values"]["txn_no"])
            assert no not in out, f"txlog row {no} inserted by {out[no]} and {r['txn_id']}"
            out[no] = r["txn_id"]
    return out


# ------------------------------------------------------------------------------------------
# comparing gold values with the source's
# ------------------------------------------------------------------------------------------

CENT = Decimal("0.01")


def _value(value, kind: str):
    """A source value or a gold value (typed by the replica, or text in an audit image) as the
    source column's Python type. Gold types a numeric(12,2) column from JSON numbers, i.e. as
    DOUBLE: it counts as exact only when the double's shortest text is the same decimal, so a
    value off by a rounding error stays visible instead of being rounded away. Timestamps arrive
    as ISO text (or as text in the session time zone, UTC, when typed TIMESTAMP)."""
    if value is None:
        return None
    if kind == "dec":
        exact = Decimal(repr(value) if isinstance(value, float) else str(value))
        return exact.quantize(CENT) if exact == exact.quantize(CENT) else exact
    if kind == "ts":
        if isinstance(value, str):
            value = datetime.fromisoformat(value.replace(" ", "T").rstrip("Z"))
        return value.replace(tzinfo=None)
    if kind == "int":
        try:
            exact = Decimal(str(value))
        except ArithmeticError:
            return value  # not a number: visible
        return int(exact) if exact == exact.to_integral_value() else value
    return value


def bare_table(table: str) -> str:
    """``table`` or ``schema.table`` -> the workload's table name."""
    return table if table in TABLES else table.split(".", 1)[1]


def canonical_row(table: str, row: dict) -> dict:
    """column -> value as the source column's Python type (``table``: bare or ``schema.table``);
    the columns are the row's own, so a missing or extra column shows in a comparison."""
    kinds = dict(TABLES[bare_table(table)][0])
    return {c: _value(v, kinds.get(c, "text")) for c, v in row.items()}


def canonical_rows(table: str, rows) -> list[tuple]:
    """Rows as sorted tuples of (column, value) pairs, see :func:`canonical_row`."""
    return sorted((tuple(sorted(canonical_row(table, r).items())) for r in rows), key=repr)
