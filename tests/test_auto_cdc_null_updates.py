"""AUTO CDC's ``ignore_null_updates`` and its column lists, applied by ``cdc.apply`` to Delta
tables, against a plain reference: in sequence order, an upsert's NULL in an ignored column keeps
the row's value before it; an upsert that inserts the row (a new key, or one after a delete)
writes its NULLs; SCD2 versions take the previous version's value. Two batches, so that the
second one's NULLs are resolved from the stored rows and history."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cdc.apply import CdcInputError, CdcSpec, apply_changes
from cdc_lakehouse.storage import Commit, LakeStore

SCHEMA = "id long, a string, b string, op string, seq long"
BATCHES = [
    [(1, "x", "y", "I", 1), (2, None, None, "I", 1), (1, None, None, "U", 2)],
    [(1, None, "z", "U", 3), (2, None, None, "D", 3), (2, None, "w", "I", 4),
     (3, "p", None, "I", 3), (3, None, None, "U", 4), (1, None, "z", "U", 5)],
]
# The same null-ignored columns, said three ways (columns a and b).
SETTINGS = {
    "column_list": ({"ignore_null_updates_column_list": ["a"]}, ["a"]),
    "except_column_list": ({"ignore_null_updates_except_column_list": ["b"]}, ["a"]),
    "every column": ({"ignore_null_updates": True}, ["a", "b"]),
}


@dataclass
class Batch:
    """One micro-batch's Delta app transaction, as ``apply_changes`` takes it from the runner."""

    store: object
    id: int

    def commit(self) -> Commit:
        return Commit("test", self.id)

    def already_committed(self, table: str) -> bool:
        version = self.store.committed_version(table, "test") if self.store.exists(table) else None
        return version is not None and version >= self.id


def _spec(scd_type: int, ignore: dict) -> CdcSpec:
    return CdcSpec(keys=["id"], sequence_by="seq", scd_type=scd_type, apply_as_deletes="op = 'D'",
                   except_column_list=["op", "seq"], **ignore)


def _apply(spark, lake, target: str, spec: CdcSpec) -> LakeStore:
    store = LakeStore(spark, lake)
    for number, rows in enumerate(BATCHES):
        apply_changes(store, target, spark.createDataFrame(rows, SCHEMA), spec, Batch(store, number), {})
    return store


def _reference(ignored: list[str]) -> tuple[dict, list[tuple]]:
    """The current rows and the SCD2 versions (every column tracked) of the changes in sequence order."""
    current: dict = {}
    versions: list[list] = []
    for id_, a, b, op, seq in sorted((c for batch in BATCHES for c in batch), key=lambda c: c[4]):
        before = current.pop(id_, None)
        if op == "D":
            _close(versions, id_, seq)
            continue
        row = {"a": a, "b": b}
        if before is not None:
            row.update({c: before[c] for c in ignored if row[c] is None})
        current[id_] = row
        if before != row:
            _close(versions, id_, seq)
            versions.append([id_, row["a"], row["b"], seq, None])
    return current, [tuple(version) for version in versions]


def _close(versions: list[list], id_: int, seq: int) -> None:
    for version in versions:
        if version[0] == id_ and version[4] is None:
            version[4] = seq


@pytest.mark.parametrize("setting", SETTINGS)
def test_scd1_keeps_the_value_before_an_ignored_null(spark, lake, setting):
    ignore, ignored = SETTINGS[setting]
    store = _apply(spark, lake, "silver.t", _spec(1, ignore))
    current, _ = _reference(ignored)
    assert current[3]["a"] == "p" and current[2]["a"] is None  # resolved within a batch; inserted as NULL
    expected = [(id_, row["a"], row["b"]) for id_, row in current.items()]
    assertDataFrameEqual(store.read("silver.t"), spark.createDataFrame(expected, "id long, a string, b string"))


def test_scd2_versions_take_the_previous_versions_value(spark, lake):
    ignore, ignored = SETTINGS["column_list"]
    store = _apply(spark, lake, "silver.t_history", _spec(2, ignore))
    _, versions = _reference(ignored)
    assert (1, "x", "z", 3, None) in versions  # a from the stored version, no new version at 5
    assertDataFrameEqual(store.read("silver.t_history"),
                         spark.createDataFrame(versions, "id long, a string, b string, __START_AT long, __END_AT long"))


@pytest.mark.parametrize("ignore, error", [
    ({"ignore_null_updates": True, "ignore_null_updates_column_list": ["a"]},
     "ignore_null_updates and ignore_null_updates_column_list cannot be used together"),
    ({"ignore_null_updates_column_list": ["a"], "ignore_null_updates_except_column_list": ["b"]},
     "ignore_null_updates_column_list and ignore_null_updates_except_column_list cannot be used together"),
    ({"ignore_null_updates_column_list": ["id"]}, r"\['id'\] are not among the applied non-key columns"),
])
def test_conflicting_or_wrong_null_update_columns_are_clear_errors(ignore, error):
    with pytest.raises(CdcInputError, match=error):
        _spec(1, ignore).null_ignored_columns(["id", "a", "b"])


def test_null_update_columns_are_named_as_spark_resolves_them_ignoring_case():
    assert _spec(1, {"ignore_null_updates_column_list": ["A"]}).null_ignored_columns(["id", "a", "b"]) == ["a"]
    assert _spec(1, {"ignore_null_updates_except_column_list": ["B"]}).null_ignored_columns(["id", "a", "b"]) == ["a"]
