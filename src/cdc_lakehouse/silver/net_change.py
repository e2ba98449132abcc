"""Operations on one row inside one transaction -> one net change (CONTRACT §3).

Input: one row per operation with ``op`` (I/U/D, or T: a shadow TRUNCATE of the table, keyed
``{}``, silver/truncates.py, or A: an ALTER TABLE, silver/schema_changes.py), ``key`` (canonical key JSON, see keys.py),
``ord`` (the operation's order in its transaction), ``row`` (full image after the operation,
JSON) and ``before`` (full image before it, JSON). Key-changing updates are split into a delete
of the old key and an insert of the new one first. Impossible pairs are kept as anomalies on the
result row, never dropped.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.silver import keys

OP_NAMES = {"I": "INSERT", "U": "UPDATE", "D": "DELETE", "T": "TRUNCATE", "A": "ALTER"}

# (state, next op) -> (new state, which image is the row, anomaly). The row of a D is the
# deleted image; "keep" leaves the state's row as it is.
_TRANSITIONS = [
    ("START", "I", "I", "row", None),
    ("START", "U", "U", "row", None),
    ("START", "D", "D", "before", None),
    ("I", "I", "I", "row", "INSERT after INSERT"),
    ("I", "U", "I", "row", None),
    ("I", "D", "NONE", "none", None),
    ("U", "I", "U", "row", "INSERT after UPDATE"),
    ("U", "U", "U", "row", None),
    ("U", "D", "D", "before", None),
    ("D", "I", "U", "row", None),
    ("D", "U", "D", "keep", "UPDATE after DELETE"),
    ("D", "D", "D", "keep", "DELETE after DELETE"),
    ("NONE", "I", "I", "row", None),
    ("NONE", "U", "NONE", "keep", "UPDATE after INSERT and DELETE"),
    ("NONE", "D", "NONE", "keep", "DELETE after INSERT and DELETE"),
    # Truncates are the rows of key {}: one or more of them in a transaction are one truncate.
    ("START", "T", "T", "none", None),
    ("T", "T", "T", "none", None),
    # An ALTER TABLE is the row of a key of its own (silver/schema_changes.py); its row, the statement.
    ("START", "A", "A", "row", None),
]


def _case(field: str) -> str:
    """The SQL CASE giving one field of the next fold state."""
    branches = []
    for state, op, new_state, image, anomaly in _TRANSITIONS:
        when = f"WHEN s.op = '{state}' AND x.op = '{op}' THEN "
        if field == "op":
            branches.append(when + f"'{new_state}'")
        elif field == "row":
            value = {"row": "x.row", "before": "x.before", "none": "CAST(NULL AS STRING)", "keep": "s.row"}[image]
            branches.append(when + value)
        elif field == "anomalies":
            value = f"concat(s.anomalies, array('{anomaly}'))" if anomaly else "s.anomalies"
            branches.append(when + value)
    return "CASE " + " ".join(branches) + f" ELSE s.{field} END"


_FOLD = f"""
aggregate(
  array_sort(ops),
  named_struct('op', 'START', 'row', CAST(NULL AS STRING),
               'before', CAST(NULL AS STRING), 'anomalies', CAST(array() AS array<string>)),
  (s, x) -> named_struct(
    'op', {_case('op')},
    'row', {_case('row')},
    'before', CASE WHEN s.op = 'START' THEN x.before ELSE s.before END,
    'anomalies', {_case('anomalies')}
  )
)
"""


def split_key_changes(ops: DataFrame) -> DataFrame:
    """An update whose key changes is a delete of the old key then an insert of the new key.
    ``old_key`` holds the key before the update (null when unchanged)."""
    changes_key = F.coalesce(
        (F.col("op") == "U") & F.col("old_key").isNotNull() & (F.col("old_key") != F.col("key")), F.lit(False)
    )
    def part(op, key, row, before, sub):
        return F.struct(op.alias("op"), key.alias("key"), row.alias("row"), before.alias("before"), F.lit(sub).alias("sub"))

    as_is = part(F.col("op"), F.col("key"), F.col("row"), F.col("before"), 0)
    delete_old = part(F.lit("D"), F.col("old_key"), F.col("before"), F.col("before"), 0)
    insert_new = part(F.lit("I"), F.col("key"), F.col("row"), F.lit(None).cast("string"), 1)
    # One pass over the operations (three filtered copies of them would compute them three times).
    parts = F.when(changes_key, F.array(delete_old, insert_new)).otherwise(F.array(as_is))
    others = [c for c in ops.columns if c not in ("op", "key", "row", "before", "old_key")]
    return ops.select(*others, F.explode(parts).alias("__part")).select(*others, "__part.*")


def combine(ops: DataFrame, group_cols: list[str]) -> DataFrame:
    """One row per (group_cols, key): ``op`` INSERT/UPDATE/DELETE or NONE (nothing happened,
    kept only to carry anomalies), ``row``, ``before`` (the image before the transaction),
    ``anomalies`` and the count of operations combined."""
    split = split_key_changes(ops)
    entry = F.struct(F.col("ord"), F.col("sub"), F.col("op"), F.col("row"), F.col("before"))
    grouped = split.groupBy(*group_cols, "key").agg(
        F.collect_list(entry).alias("ops"), F.count(F.lit(1)).alias("op_count")
    )
    folded = grouped.select(*group_cols, "key", "op_count", F.expr(_FOLD).alias("net"))
    op_name = F.coalesce(*[F.when(F.col("net.op") == k, F.lit(v)) for k, v in OP_NAMES.items()], F.lit("NONE"))
    return folded.select(
        *group_cols, "key", "op_count",
        op_name.alias("op"),
        F.col("net.row").alias("row"),
        F.when(F.col("net.op").isin("U", "D"), F.col("net.before")).alias("before"),
        F.col("net.anomalies").alias("anomalies"),
    )


def changed_columns(before_json, after_json):
    """Names of the columns whose value differs between two JSON images (all of a side's
    non-null columns when the other side is missing)."""
    empty = F.create_map().cast("map<string,string>")
    before = F.coalesce(_value_texts(before_json), empty)
    after = F.coalesce(_value_texts(after_json), empty)
    # The images are parsed once, as arguments: a lambda that read them would parse them again
    # for every column. A missing column and a JSON null are the same value here.
    marker = F.lit("\u0000")
    differs = F.map_zip_with(before, after, lambda _, b, a: ~F.coalesce(b, marker).eqNullSafe(F.coalesce(a, marker)))
    return F.array_sort(F.map_keys(F.map_filter(differs, lambda _, d: d)))


def _value_texts(image):
    """Column -> value as JSON text, NULL for a JSON null. Parsed as a variant, which keeps
    decimals of up to 38 digits exact (``from_json`` rounds them to doubles, so a change in a
    late digit would not show); ``1.50`` and ``1.5`` are the same value."""
    values = keys.exact_members(image)
    return F.transform_values(values, lambda _, v: F.when(~F.is_variant_null(v), F.to_json(v)))
