"""The landing kinds of CONTRACT §2: where each lands, its bronze columns and its rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.bronze.fields import Field, utc_timestamp
from cdc_lakehouse.bronze.rules import Rule, required, types
from cdc_lakehouse.config import Onboarding

QUALIFIED = "CASE WHEN `table` IS NOT NULL THEN concat_ws('.', `schema`, `table`) END"
ROW_EVENT = "coalesce(`type` IN ('insert', 'update', 'delete'), false)"
EVENT_TYPES = ("begin", "insert", "update", "delete", "commit", "rollback", "ddl")
STATEMENT = "statement"  # a DML statement logged as SQL (capture/binlog_events.py): always quarantined
SHADOW_FOLDER = r"/shadow/([^/.]+)[.]([^/]+)/[^/]+$"
SNAPSHOT_FOLDER = r"/snapshot/([^/]+)/([^/]+)/[^/]+$"


@dataclass(frozen=True)
class Kind:
    name: str  # bronze table <source>_<name>
    folder: str  # under <landing>/<source>/; may be a glob
    fields: tuple[Field, ...]  # parsed from each line, in contract order
    rules: tuple[Rule, ...]
    capture: str | None = None  # landed only by sources of this capture; None: by all
    columns: tuple[str, ...] = ()  # bronze columns in order; default: the fields
    # Columns are built when a flow runs (a Column needs a live Spark session), hence functions.
    derived: dict[str, Callable[[], Column]] = field(default_factory=dict)  # not read from a field
    extra_bad: dict[str, Callable[[], Column]] = field(default_factory=dict)
    name_filter: str | None = None  # pathGlobFilter
    whole_file: bool = False  # one JSON document per file rather than JSON Lines
    rescue: bool = True  # keep unknown fields in _rescued_data
    flags_onboarding: bool = False  # has _onboarded
    source_table: str | None = None  # SQL: the "schema.table" a row is about, if any

    @property
    def bronze_columns(self) -> tuple[str, ...]:
        return self.columns or tuple(f.name for f in self.fields)


def _fields(ddl: str) -> tuple[Field, ...]:
    return tuple(Field(*part.strip().split(" ", 1)) for part in ddl.split(","))


def _names(fields: tuple[Field, ...]) -> list[str]:
    return [f.name for f in fields]


def _folder(pattern: str, group: int) -> Column:
    """A part of the file's folder name, as the source names it: the file path is a URI
    (``%20`` for a space), and the capture %-escapes the name itself (contract/landing.py)."""
    return F.nullif(_unescape(_unescape(F.regexp_extract("_source_file", pattern, group))), F.lit(""))


def _unescape(text: Column) -> Column:
    # url_decode also reads "+" as a space (form encoding); neither escaping writes it so.
    return F.url_decode(F.replace(text, F.lit("+"), F.lit("%2B")))


# -- binlog (§2.1, §2.2) ---------------------------------------------------------------------
BINLOG_FIELDS = _fields(
    "server_id long, file string, pos long, ts long, gtid string, type string, xid long, "
    "thread_id long, schema string, table string, primary_key array<string>, rows array, query string, epoch long"
)

_IMAGES_HAVE_KEY = """forall(from_json(`rows`, 'array<struct<before:string,after:string>>'), r -> r IS NOT NULL
    AND (`type` = 'insert' OR forall(primary_key, k -> array_contains(json_object_keys(r.before), k)))
    AND (`type` = 'delete' OR forall(primary_key, k -> array_contains(json_object_keys(r.after), k))))"""

BINLOG_EVENTS = Kind(
    name="binlog_events",
    capture="binlog",
    folder="binlog",
    fields=BINLOG_FIELDS,
    source_table=QUALIFIED,
    rules=(
        required(["server_id", "file", "pos", "ts", "type"]),
        Rule("binlog position in range", binlog_position.IN_RANGE, binlog_position.OUT_OF_RANGE_REASON),
        Rule("row-based logging", f"coalesce(`type` <> '{STATEMENT}', true)",
             "'a DML statement logged as SQL (binlog_format STATEMENT or MIXED): the rows it changed are not "
             "in the binlog; set binlog_format=ROW and binlog_row_image=FULL on the server'"),
        Rule("known event type", f"`type` IS NULL OR `type` IN {EVENT_TYPES}", "concat('unknown type ', `type`)"),
        Rule("row event names its table", f"NOT {ROW_EVENT} OR (`schema` IS NOT NULL AND `table` IS NOT NULL)",
             "'row event without schema or table'"),
        Rule("row event has a primary key", f"NOT {ROW_EVENT} OR size(primary_key) > 0",
             "'row event without primary_key'"),
        Rule("row event has rows", f"NOT {ROW_EVENT} OR json_array_length(`rows`) > 0", "'row event without rows'"),
        Rule("row images carry the primary key",
             f"NOT {ROW_EVENT} OR NOT coalesce(size(primary_key) > 0 AND json_array_length(`rows`) > 0, false) "
             f"OR {_IMAGES_HAVE_KEY}",
             "'row images without every primary_key column (insert: after, update: both, delete: before)'"),
        Rule("ddl has its query", "coalesce(`type` <> 'ddl', true) OR `query` IS NOT NULL", "'ddl without query'"),
        types(_names(BINLOG_FIELDS)),
    ),
)

SESSION_FIELDS = _fields("server_id long, thread_id long, connected_at timestamp, user string, role string")
SESSIONS = Kind(
    name="sessions",
    capture="binlog",
    folder="sessions",
    fields=SESSION_FIELDS,
    rules=(required(["server_id", "thread_id", "connected_at"]), types(_names(SESSION_FIELDS))),
)

# -- shadow (§2.3, §2.4) ---------------------------------------------------------------------
TXN_FIELDS = _fields(
    "txn_id string, end_ts timestamp, db_user string, db_role string, client string, application string"
)
SHADOW_TRANSACTIONS = Kind(
    name="shadow_transactions",
    capture="shadow",
    folder="shadow/_transactions",
    fields=TXN_FIELDS,
    rules=(required(["txn_id", "end_ts"]), types(_names(TXN_FIELDS))),
)

CHANGE_FIELDS = _fields(
    "txn_id string, op_ts timestamp, op_seq long, op string, key object, old_key object, values object"
)
SHADOW_CHANGES = Kind(
    name="shadow_changes",
    capture="shadow",
    # Every <schema>.<table> folder; the dot leaves out _transactions.
    folder="shadow/*.*",
    fields=CHANGE_FIELDS,
    columns=("schema", "table", *_names(CHANGE_FIELDS)),
    derived={"schema": lambda: _folder(SHADOW_FOLDER, 1), "table": lambda: _folder(SHADOW_FOLDER, 2)},
    flags_onboarding=True,
    source_table=QUALIFIED,
    rules=(
        Rule("in a <schema>.<table> folder", "`schema` IS NOT NULL AND `table` IS NOT NULL",
             "'not in a <schema>.<table> folder under shadow/'"),
        required(["txn_id", "op_ts", "op", "key"]),
        # T: a TRUNCATE of the table, A: an ALTER TABLE or DROP TABLE (PostgreSQL's statement
        # and event triggers; MariaDB's export for a table gone), keyed {} (docs/capture.md).
        Rule("known op", "`op` IS NULL OR `op` IN ('I', 'U', 'D', 'T', 'A')", "concat('unknown op ', `op`)"),
        Rule("key names a column", "`key` IS NULL OR `op` IN ('T', 'A') OR size(json_object_keys(`key`)) > 0",
             "'key has no columns'"),
        Rule("truncate names no row",
             "coalesce(`op` <> 'T', true) OR (size(json_object_keys(`key`)) = 0 AND `values` IS NULL "
             "AND `old_key` IS NULL)", "'truncate with a key or values'"),
        Rule("alter names its statement and no row",
             "coalesce(`op` <> 'A', true) OR (size(json_object_keys(`key`)) = 0 AND `old_key` IS NULL "
             "AND get_json_object(`values`, '$.statement') IS NOT NULL)", "'alter without its statement or with a key'"),
        Rule("insert and update carry values", "coalesce(`op` NOT IN ('I', 'U'), true) OR `values` IS NOT NULL",
             "concat('op ', `op`, ' without values')"),
        Rule("insert values carry the key",
             "coalesce(`op` <> 'I', true) OR `values` IS NULL OR `key` IS NULL "
             "OR forall(json_object_keys(`key`), k -> array_contains(json_object_keys(`values`), k))",
             "'insert values without every key column'"),
        types(_names(CHANGE_FIELDS)),
    ),
)

# -- snapshots (§2.5) ------------------------------------------------------------------------
def _position() -> Column:
    return F.from_json("position", "file string, pos long, txn_end_ts string")


def _position_is_bad() -> Column:
    """A position is a log position, a commit time, or null: anything else is not a position."""
    p = _position()
    log = p.file.isNotNull() & p.pos.isNotNull() & p.txn_end_ts.isNull()
    commit = p.file.isNull() & p.pos.isNull() & utc_timestamp(p.txn_end_ts).isNotNull()
    return F.col("position").isNotNull() & ~F.coalesce(log | commit, F.lit(False))


MANIFEST_FIELDS = _fields(
    "snapshot_id string, table string, key array<string>, taken_at timestamp, position object, "
    "row_count long, complete boolean"
)
SNAPSHOT_MANIFESTS = Kind(
    name="snapshot_manifests",
    folder="snapshot",
    name_filter="_manifest.json",
    whole_file=True,
    fields=MANIFEST_FIELDS,
    source_table="`table`",
    columns=("snapshot_id", "table", "key", "taken_at", "position_file", "position_pos",
             "position_txn_end_ts", "row_count", "complete"),
    derived={
        "position_file": lambda: _position().file,
        "position_pos": lambda: _position().pos,
        "position_txn_end_ts": lambda: utc_timestamp(_position().txn_end_ts),
    },
    extra_bad={"position": _position_is_bad},
    rules=(
        required(["snapshot_id", "table", "key", "taken_at"]),
        Rule("key names a column", "`key` IS NULL OR size(`key`) > 0", "'key has no columns'"),
        Rule("manifest matches its folder",
             f"`table` = regexp_extract(_source_file, '{SNAPSHOT_FOLDER}', 1) "
             f"AND snapshot_id = regexp_extract(_source_file, '{SNAPSHOT_FOLDER}', 2)",
             "'table or snapshot_id differs from the <schema>.<table>/<snapshot_id> folder'"),
        types(_names(MANIFEST_FIELDS)),
    ),
)

SNAPSHOT_ROWS = Kind(
    name="snapshot_rows",
    folder="snapshot",
    name_filter="part-*",
    fields=(),
    rescue=False,
    source_table="`table`",
    columns=("table", "snapshot_id", "row"),
    derived={
        "table": lambda: _folder(SNAPSHOT_FOLDER, 1),
        "snapshot_id": lambda: _folder(SNAPSHOT_FOLDER, 2),
        "row": lambda: F.when(F.col("_fields").isNotNull(), F.col("_raw")),
    },
    rules=(
        Rule("row is a JSON object", "`row` IS NOT NULL"),
        Rule("in a <schema>.<table>/<snapshot_id> folder", "`table` RLIKE '^[^.]+[.].+$' AND snapshot_id IS NOT NULL",
             "'not in a <schema>.<table>/<snapshot_id> folder under snapshot/'"),
    ),
)

KINDS = (BINLOG_EVENTS, SESSIONS, SHADOW_TRANSACTIONS, SHADOW_CHANGES, SNAPSHOT_MANIFESTS, SNAPSHOT_ROWS)


def landing_kinds(onboarding: Onboarding) -> list[tuple[str, Kind]]:
    """(source, kind) for every bronze table the onboarded sources need."""
    pairs = []
    for source in onboarding.sources:
        captures = {flow.capture for flow in onboarding.for_source(source)}
        pairs += [(source, kind) for kind in KINDS if kind.capture is None or kind.capture in captures]
    return pairs


def onboarded_tables(onboarding: Onboarding, source: str) -> list[str]:
    """``schema.table`` of the source's replicated tables, lower case (Spark names are)."""
    return sorted({flow.qualified_table.lower() for flow in onboarding.for_source(source)})
