"""The snapshot benchmark's floor (bench/snapshot_floor.py) measures real work and changes no
row: its comparison finds exactly the keys that differ, and its MERGEs into the replica, the
history and their AUTO CDC states leave each table with the rows it had."""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from bench import snapshot_floor
from cdc_lakehouse.storage import LakeStore

REPLICA, KEY = "silver.shop_customers", "customer_id"  # SCD2 in conf/onboarding.yml


def _snapshot_with_two_differences(store, folder):
    """The replica's rows as snapshot lines, but its first key missing and its second renamed."""
    rows = store.read(REPLICA)
    first, second = [r[KEY] for r in rows.orderBy(KEY).limit(2).collect()]
    changed = rows.filter(F.col(KEY) != first).withColumn(
        "name", F.when(F.col(KEY) == second, F.lit("someone else")).otherwise(F.col("name")))
    changed.select(F.to_json(F.struct(*rows.columns))).write.text(str(folder))
    return sorted(folder.glob("part-*"))


def test_the_floor_finds_the_difference_and_changes_no_row(spark, demo_lake_copy, tmp_path):
    store = LakeStore(spark, demo_lake_copy)
    tables = snapshot_floor.tables(REPLICA, KEY, scd=2)
    before = {name: store.version(name) for name in tables}
    parts = _snapshot_with_two_differences(store, tmp_path / "snapshot")

    floor = snapshot_floor.measure(spark, store, REPLICA, KEY, parts, step=5, scd=2)

    assert floor["differing_keys"] == 2
    assert set(floor["merge_s"]) == set(tables)
    for name, version in before.items():
        merged = store.history(name, 1)[0]["operationMetrics"]
        assert int(merged["numTargetRowsUpdated"]) > 0, f"the MERGE into {name} matched no row"
        assertDataFrameEqual(store.read(name), store.read(name, version))
