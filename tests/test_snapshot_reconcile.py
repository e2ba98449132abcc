"""`snapshot reconcile` / `snapshot diff` against crafted replicas: which corrections, in which
shape and order, and which snapshots are not read (incomplete) or quarantined (with why)."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cdc.snapshot import OP
from cdc_lakehouse.cli import build_parser, main
from cdc_lakehouse.config import load_onboarding
from cdc_lakehouse.snapshot import compare as cmp
from cdc_lakehouse.snapshot.corrections import read_corrections
from cdc_lakehouse.snapshot.reconcile import diff_snapshot
from cdc_lakehouse.snapshot.sequence import SORTS_LAST
from cdc_lakehouse.storage import LakeStore
from test_snapshot_support import T0, product, products_onboarding, reconcile, write_snapshot

PRODUCT = "product_id long, name string, price double"
STATE = "product_id long, __seq struct<position: long, txn: string>, __deleted boolean, __updated_at timestamp"
POSITION = {"file": "mysql-bin.000002", "pos": 500}
LSN = (2 << 32) + 500


@pytest.fixture
def onboarding(tmp_path):
    return products_onboarding(tmp_path, scd_type=1)


def make_replica(spark, lake, rows, state=None, table="silver.shop_products", schema=PRODUCT, state_schema=STATE):
    store = LakeStore(spark, lake)
    store.overwrite(table, spark.createDataFrame(rows, schema))
    if state is not None:
        store.overwrite("silver.__apply_changes_storage_shop_products", spark.createDataFrame(state, state_schema))
    return store


def corrections_of(spark, landing, snapshot_id, table="shop.products"):
    return read_corrections(spark, landing / "shop" / "corrections" / table / f"{snapshot_id}.jsonl")


def status_of(landing, snapshot_id, table="shop.products"):
    return json.loads((landing / "shop" / "corrections" / table / f"_{snapshot_id}.status.json").read_text())


def test_corrections_are_exactly_the_difference(spark, tmp_path, onboarding):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    make_replica(spark, lake, [(1, "a", 1.0), (2, "b", 2.0), (3, "c", 3.0), (5, "e", None)])
    write_snapshot(landing, "s1", [product(1, "a", 1.0), product(2, "b2", 2.0), product(4, "d", 4.0),
                                   product(5, "e", 5.0)], position=POSITION, parts=2)
    [outcome] = reconcile(spark, landing, lake, onboarding)

    assert outcome.status == "reconciled"
    assert outcome.counts == {"snapshot_rows": 4, "replica_rows": 4, "inserts": 1, "updates": 2, "deletes": 1,
                              "unchanged": 1, "superseded": 0}
    changes = corrections_of(spark, landing, "s1")
    assertDataFrameEqual(changes.select("op", "key", "row", "before", "changed_columns"), spark.createDataFrame([
        ("INSERT", '{"product_id":"4"}', '{"product_id": 4, "name": "d", "price": 4.0}', None,
         ["name", "price", "product_id"]),
        ("UPDATE", '{"product_id":"2"}', '{"product_id": 2, "name": "b2", "price": 2.0}',
         '{"product_id":2,"name":"b","price":2.0}', ["name"]),
        ("UPDATE", '{"product_id":"5"}', '{"product_id": 5, "name": "e", "price": 5.0}',
         '{"product_id":5,"name":"e","price":null}', ["price"]),
        ("DELETE", '{"product_id":"3"}', '{"product_id":3,"name":"c","price":3.0}',
         '{"product_id":3,"name":"c","price":3.0}', ["name", "price", "product_id"]),
    ], "op string, key string, row string, before string, changed_columns array<string>"))
    assertDataFrameEqual(
        changes.select("source", "schema", "table", "txn_id", "sequence", "user", "role", "origin", "op_count",
                       "anomalies").distinct(),
        spark.createDataFrame([("shop", "shop", "products", "snapshot:s1", (LSN, f"{SORTS_LAST}snapshot:s1"),
                                "snapshot", "snapshot", "snapshot", 1, [])], changes.select(
            "source", "schema", "table", "txn_id", "sequence", "user", "role", "origin", "op_count", "anomalies").schema),
    )
    assert status_of(landing, "s1")["changes"] == 4


def test_a_key_name_repeated_in_a_nested_value_does_not_mislead(spark, tmp_path, onboarding):
    """The lines of the difference are joined by their parsed top-level key, never by a text
    search that a nested member of the same name could answer."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    make_replica(spark, lake, [(1, "a", 1.0), (2, "b", 2.0)])
    hidden = {"meta": {"product_id": 1}, **product(2, "b2", 2.0)}
    write_snapshot(landing, "s1", [product(1, "a", 1.0), hidden, product(3, "c", 3.0)])
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert (outcome.counts["inserts"], outcome.counts["updates"]) == (1, 1)
    changes = corrections_of(spark, landing, "s1").select("op", "row")
    assertDataFrameEqual(changes, spark.createDataFrame(
        [("UPDATE", json.dumps(hidden)), ("INSERT", json.dumps(product(3, "c", 3.0)))], "op string, row string"))


def test_lines_not_at_their_recorded_places_are_found_by_their_parsed_key(spark, tmp_path):
    """The lines of the difference are looked up at the places where the comparison read their
    rows. A place that names another line (were the two reads to split the files differently)
    fails the join by key, and then every line's key is parsed: the lines found are still the
    right ones."""
    rows = [product(i, f"p{i}", float(i)) for i in (1, 2, 3)]
    part = tmp_path / "part-00000.jsonl"
    part.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = cmp.TableSpec("shop", "shop.products", ("product_id",), "silver.shop_products")
    wanted = spark.createDataFrame([(2, "UPDATE", 0), (3, "INSERT", 2)], f"product_id long, {OP} string, {cmp.AT} long")
    found = cmp.snapshot_lines(cmp.read_lines(spark, [part]), StructType([StructField("product_id", LongType())]),
                               wanted, spec, lambda df: df)
    assertDataFrameEqual(found.select("product_id", OP, cmp.LINE), spark.createDataFrame(
        [(2, "UPDATE", json.dumps(rows[1])), (3, "INSERT", json.dumps(rows[2]))], f"product_id long, {OP} string, {cmp.LINE} string"))


def test_column_filters_apply_before_comparing(spark, tmp_path):
    """A hashed column compares hashed; a renamed one under its silver name; corrections keep
    the source's names and values (silver filters them again on the way to the replica)."""
    onboarding = products_onboarding(tmp_path, scd_type=1, column_filters={"hash": ["name"], "rename": {"price": "unit_price"}})
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    replica = spark.createDataFrame([(1, "a", 1.0), (2, "b", 2.0)], PRODUCT).select(
        "product_id", F.sha2("name", 256).alias("name"), F.col("price").alias("unit_price"))
    LakeStore(spark, lake).overwrite("silver.shop_products", replica)
    write_snapshot(landing, "s1", [product(1, "a", 1.0), product(2, "b", 2.5)])
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert (outcome.counts["updates"], outcome.counts["unchanged"]) == (1, 1)
    assertDataFrameEqual(corrections_of(spark, landing, "s1").select("key", "changed_columns"),
                         spark.createDataFrame([('{"product_id":"2"}', ["price"])], "key string, changed_columns array<string>"))


@pytest.mark.parametrize("replica, second, example", [
    (None, product(2, "b?", 2.1), """{'key': '{"product_id":"2"}', 'rows': 2}"""),
    ([(1, "a", 1.0)], product(2, "b?", 2.1), "{'product_id': 2, 'rows': 2}"),
    # Both rows equal the replica's, and nothing else differs: the difference alone is empty.
    ([(1, "a", 1.0), (2, "b", 2.0), (3, "c", 3.0)], product(2, "b", 2.0), "{'product_id': 2, 'rows': 2}"),
], ids=["first snapshot", "against a replica", "repeating a replica row"])
def test_duplicate_keys_quarantine_the_snapshot(spark, tmp_path, onboarding, replica, second, example):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    if replica:
        make_replica(spark, lake, replica)
    write_snapshot(landing, "dup", [product(1, "a", 1.0), product(2, "b", 2.0), second, product(3, "c", 3.0)])
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert outcome.status == "quarantined"
    assert outcome.reason == (f"duplicate keys: 1 key(s) occur in more than one row, e.g. [{example}]; "
                              "a snapshot holds one row per key, and picking one would be a guess")
    assert status_of(landing, "dup")["status"] == "quarantined"
    assert not (landing / "shop/corrections/shop.products/dup.jsonl").exists()
    assert reconcile(spark, landing, lake, onboarding) == []  # recorded: not compared again


def test_a_snapshot_equal_to_the_replica_corrects_nothing(spark, tmp_path, onboarding):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    make_replica(spark, lake, [(1, "a", 1.0), (2, "b", None)])
    write_snapshot(landing, "same", [product(2, "b", None), product(1, "a", 1.0)], parts=2)
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert (outcome.status, outcome.counts) == ("reconciled", {
        "snapshot_rows": 2, "replica_rows": 2, "inserts": 0, "updates": 0, "deletes": 0, "unchanged": 2, "superseded": 0})
    assert corrections_of(spark, landing, "same").count() == 0


def test_incomplete_manifest_is_not_read(spark, tmp_path, onboarding):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_snapshot(landing, "s1", [product(1, "a", 1.0)], complete=False)
    write_snapshot(landing, "s2", [product(1, "a", 1.0)], manifest=False, taken_at=T0 + timedelta(hours=1))
    outcomes = reconcile(spark, landing, lake, onboarding)
    assert [(o.snapshot_id, o.status, o.reason) for o in outcomes] == [
        ("s1", "waiting", "manifest is not complete yet"), ("s2", "waiting", "no _manifest.json yet")]
    assert list((landing / "shop/corrections").rglob("*")) == []

    write_snapshot(landing, "s1", [product(1, "a", 1.0)], complete=True)
    assert [(o.snapshot_id, o.status) for o in reconcile(spark, landing, lake, onboarding)] == [
        ("s2", "waiting"), ("s1", "reconciled")]


def test_reconcile_twice_writes_nothing_new(spark, tmp_path, onboarding):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    make_replica(spark, lake, [(1, "a", 1.0)])
    write_snapshot(landing, "s1", [product(1, "z", 1.0)])
    [first] = reconcile(spark, landing, lake, onboarding)
    written = {p: p.stat().st_mtime_ns for p in (landing / "shop/corrections").rglob("*")}
    assert reconcile(spark, landing, lake, onboarding) == []
    assert {p: p.stat().st_mtime_ns for p in (landing / "shop/corrections").rglob("*")} == written
    assert first.counts["updates"] == 1 and not list((landing / "shop/corrections").rglob(".*"))


@pytest.mark.parametrize("snapshot, reason", [
    (dict(row_count=5), "manifest says row_count 5, the part files hold 1 rows"),
    (dict(key=("sku",)), "manifest key ['sku'] differs from the replica's key ['product_id']"),
    (dict(position={"txn_end_ts": "2026-03-01T12:00:00Z"}), "position shadow does not fit a binlog source"),
    (dict(position={"file": "mysql-bin.000001"}), "invalid manifest: position must be"),
    (dict(rows=[{"name": "no key"}]), "1 row(s) have no value for key ['product_id']"),
    (dict(rows=[{"product_id": "x1", "name": "a", "price": 1.0}], replica=True), "1 row(s) have no value for key"),
    (dict(rows=[[product(1, "a", 1.0), product(2, "b", 2.0)]], row_count=1, replica=True),
     "1 row(s) have no value for key"),  # an array is no row, even of rows
    (dict(rows=[product(1, "a", 1.0), 5], replica=True), "1 row(s) have no value for key"),
])
def test_invalid_snapshots_are_quarantined_with_the_reason(spark, tmp_path, onboarding, snapshot, reason):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    if snapshot.pop("replica", False):
        make_replica(spark, lake, [(1, "a", 1.0)])
    write_snapshot(landing, "bad", snapshot.pop("rows", [product(1, "a", 1.0)]), **snapshot)
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert (outcome.status, outcome.reason[:len(reason)]) == ("quarantined", reason)


def test_latest_pending_snapshot_wins_older_ones_are_skipped(spark, tmp_path, onboarding):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    make_replica(spark, lake, [(1, "a", 1.0)])
    for i, name in enumerate(["old", "new", "mid"]):
        write_snapshot(landing, name, [product(1, name, 1.0)], taken_at=T0 + timedelta(hours={"old": 0, "mid": 1, "new": 2}[name]))
    outcomes = {o.snapshot_id: (o.status, o.reason) for o in reconcile(spark, landing, lake, onboarding)}
    assert outcomes == {"old": ("skipped", "superseded by the later snapshot new"),
                        "mid": ("skipped", "superseded by the later snapshot new"), "new": ("reconciled", None)}
    write_snapshot(landing, "late", [product(1, "late", 1.0)], taken_at=T0 + timedelta(hours=1, minutes=30))
    [late] = reconcile(spark, landing, lake, onboarding)
    assert (late.status, late.reason) == ("skipped", "taken before snapshot new, which is already reconciled")


def test_next_snapshot_waits_until_the_previous_corrections_are_applied(spark, tmp_path, onboarding):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_snapshot(landing, "s1", [product(1, "a", 1.0), product(2, "b", 2.0)])  # seeds: no replica yet
    [seed] = reconcile(spark, landing, lake, onboarding)
    assert seed.sequence["position"] == 1  # "as of now" with an empty change stream: just after 0
    write_snapshot(landing, "s2", [product(1, "a", 1.0)], taken_at=T0 + timedelta(hours=1))
    [waiting] = reconcile(spark, landing, lake, onboarding)
    assert (waiting.status, waiting.reason) == (
        "waiting", "2 correction(s) of snapshot s1 are not applied yet: run the pipeline first")

    applied = (1, f"{SORTS_LAST}snapshot:s1")  # as AUTO CDC records the seed's inserts
    make_replica(spark, lake, [(1, "a", 1.0), (2, "b", 2.0)],
                 state=[(1, applied, False, None), (2, applied, False, None)])
    [done] = reconcile(spark, landing, lake, onboarding)
    assert (done.status, done.counts["deletes"]) == ("reconciled", 1)


def test_previous_corrections_overtaken_by_later_changes_are_judged_per_key(spark, tmp_path, onboarding):
    """One key at the snapshot's own sequence says its corrections were applied; without one,
    each key's state decides: older is behind, later is overtaken (applied or decided since)."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_snapshot(landing, "s1", [product(1, "a", 1.0), product(2, "b", 2.0)])
    reconcile(spark, landing, lake, onboarding)
    write_snapshot(landing, "s2", [product(1, "a", 1.0)], taken_at=T0 + timedelta(hours=1))
    older, later = (0, "xid:1"), (5, "xid:9")
    make_replica(spark, lake, [(1, "a", 1.0), (2, "b", 2.0)],
                 state=[(1, older, False, None), (2, later, False, None)])
    [waiting] = reconcile(spark, landing, lake, onboarding)
    assert (waiting.status, waiting.reason) == (
        "waiting", "1 correction(s) of snapshot s1 are not applied yet: run the pipeline first")

    make_replica(spark, lake, [(1, "a", 1.0), (2, "b", 2.0)],
                 state=[(1, later, False, None), (2, (1, f"{SORTS_LAST}snapshot:s1"), False, None)])
    [done] = reconcile(spark, landing, lake, onboarding)
    assert (done.status, done.counts["deletes"]) == ("reconciled", 1)


def test_previous_corrections_are_judged_per_key_whatever_the_key_type(spark, tmp_path, onboarding):
    """A key's text in the corrections (``{"product_id":"1.5"}``) is not how its state holds it
    (a DECIMAL(38,20) key 1.50000000000000000000): the two are compared as the state's type."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_snapshot(landing, "s1", [product(1.5, "a", 1.0), product(2.5, "b", 2.0)])
    reconcile(spark, landing, lake, onboarding)
    write_snapshot(landing, "s2", [product(1.5, "a", 1.0)], taken_at=T0 + timedelta(hours=1))
    older, later = (0, "xid:1"), (5, "xid:9")
    decimal_key = "product_id decimal(38,20)"
    make_replica(spark, lake, [(Decimal("1.5"), "a", 1.0), (Decimal("2.5"), "b", 2.0)],
                 state=[(Decimal("1.5"), older, False, None), (Decimal("2.5"), later, False, None)],
                 schema=PRODUCT.replace("product_id long", decimal_key),
                 state_schema=STATE.replace("product_id long", decimal_key))
    [waiting] = reconcile(spark, landing, lake, onboarding)
    assert (waiting.status, waiting.reason) == (
        "waiting", "1 correction(s) of snapshot s1 are not applied yet: run the pipeline first")


def test_as_of_now_sorts_after_everything_in_the_change_stream(spark, tmp_path, onboarding):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    store = make_replica(spark, lake, [(1, "a", 1.0)])
    store.overwrite("silver.shop_changes", spark.createDataFrame(
        [((LSN, "xid:9"),), ((LSN + 7, f"{SORTS_LAST}snapshot:earlier"),)], "sequence struct<position: long, txn: string>"))
    write_snapshot(landing, "now", [product(1, "b", 1.0)], position=None)
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert outcome.sequence["position"] == LSN + 8


def test_sequence_ties_sort_after_the_position_and_before_later_commits(spark):
    """U+10FFFF sorts after any transaction id at the same position, ASCII or not."""
    ids = ["xid:99", "gtid:0-1-5", "pos:1:mysql-bin.000002:500", "7475", "zz", "\u00e9t\u00e9", "\U0001F600", "\uffff"]
    rows = [((LSN, t), t) for t in ids] + [((LSN, f"{SORTS_LAST}snapshot:s1"), "correction"), ((LSN + 1, "xid:100"), "later")]
    ordered = [r["what"] for r in spark.createDataFrame(rows, "seq struct<position: long, txn: string>, what string")
               .orderBy("seq").collect()]
    assert ordered[-2:] == ["correction", "later"]


def test_diff_is_a_dry_run_that_prints_the_counts(spark, tmp_path, onboarding, capsys):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    make_replica(spark, lake, [(1, "a", 1.0), (2, "b", 2.0)])
    folder = write_snapshot(landing, "s1", [product(1, "a", 1.5), product(3, "c", 3.0)])
    assert main(["snapshot", "diff", "--lake", str(lake), "--table", "silver.shop_products",
                 "--snapshot", str(folder), "--config", str(onboarding), "--json"]) == 0
    [printed] = json.loads(capsys.readouterr().out)
    assert (printed["status"], printed["counts"]) == ("dry_run", {
        "snapshot_rows": 2, "replica_rows": 2, "inserts": 1, "updates": 1, "deletes": 1, "unchanged": 0, "superseded": 0})
    assert not (landing / "shop" / "corrections").exists()


def test_diff_prints_each_count_beside_its_name(spark, tmp_path, onboarding, capsys):
    """The table a user reads (no --json), piped as in a log: no header cut short, every count
    on the line of its name."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    make_replica(spark, lake, [(1, "a", 1.0), (2, "b", 2.0), (4, "d", 4.0)])
    folder = write_snapshot(landing, "s1", [product(1, "a", 1.5), product(3, "c", 3.0)])
    assert main(["snapshot", "diff", "--lake", str(lake), "--table", "silver.shop_products",
                 "--snapshot", str(folder), "--config", str(onboarding)]) == 0
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in capsys.readouterr().out.splitlines()]
    shown = {row[0]: row[1] for row in cells if len(row) == 2}
    assert {k: shown.get(k) for k in ("status", "inserts", "updates", "deletes", "unchanged")} == {
        "status": "dry_run", "inserts": "1", "updates": "1", "deletes": "2", "unchanged": "0"}


def test_diff_of_a_table_or_folder_that_is_not_there_is_an_error(spark, tmp_path, onboarding, capsys):
    """A typo must not read as a first snapshot that seeds a replica with every row."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    make_replica(spark, lake, [(1, "a", 1.0)])
    folder = write_snapshot(landing, "s1", [product(1, "a", 1.0)])
    diff = ["snapshot", "diff", "--lake", str(lake), "--config", str(onboarding)]
    assert main([*diff, "--table", "silver.shop_prodcts", "--snapshot", str(folder)]) == 2
    assert "silver.shop_prodcts is neither a table of the lake nor the replica of an onboarded flow" in capsys.readouterr().err
    assert main([*diff, "--table", "silver.shop_products", "--snapshot", str(folder.parent / "s2")]) == 2
    assert f"no snapshot folder at {folder.parent / 's2'}" in capsys.readouterr().err
    # Before, the wrong table's snapshot was judged by its key: "manifest key ... differs".
    orders = write_snapshot(landing, "s1", [{"order_id": 1}], table="shop.orders", key=("order_id",))
    assert main([*diff, "--table", "silver.shop_products", "--snapshot", str(orders)]) == 2
    assert ("the snapshot is of shop.orders from source shop, but silver.shop_products replicates shop.products "
            "from source shop") in " ".join(capsys.readouterr().err.split())
    # A folder outside a landing layout names no source; its table is still checked.
    elsewhere = Path(shutil.copytree(folder, tmp_path / "export" / "shop.products" / "s1"))
    outcome = diff_snapshot(spark, LakeStore(spark, lake), elsewhere, "silver.shop_products", load_onboarding(onboarding))
    assert (outcome.source, outcome.status, outcome.counts["unchanged"]) == ("?", "dry_run", 1)


def test_a_manifest_without_row_count_says_it_is_missing(spark, tmp_path, onboarding):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    folder = write_snapshot(landing, "s1", [product(1, "a", 1.0)])
    manifest = json.loads((folder / "_manifest.json").read_text())
    del manifest["row_count"]
    (folder / "_manifest.json").write_text(json.dumps(manifest))
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert (outcome.status, outcome.reason) == (
        "quarantined", "invalid manifest: row_count is missing (the number of rows in the part files)")


def test_diff_against_an_onboarded_replica_not_created_yet_says_it_would_seed_it(spark, tmp_path, onboarding):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    folder = write_snapshot(landing, "s1", [product(1, "a", 1.0), product(2, "b", 2.0)])
    outcome = diff_snapshot(spark, LakeStore(spark, lake), folder, "silver.shop_products", load_onboarding(onboarding))
    assert (outcome.status, outcome.counts["inserts"], outcome.reason) == (
        "dry_run", 2, "silver.shop_products does not exist yet: this snapshot would seed it (every row an INSERT)")


def test_reconcile_command(spark, tmp_path, onboarding, capsys):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_snapshot(landing, "s1", [product(1, "a", 1.0)])
    assert main(["snapshot", "reconcile", "--lake", str(lake), "--new-lake", "--config", str(onboarding),
                 "--landing", str(landing), "--json"]) == 0
    [printed] = json.loads(capsys.readouterr().out)
    assert (printed["status"], printed["counts"]["inserts"]) == ("reconciled", 1)


@pytest.mark.parametrize("made", [False, True])
def test_reconcile_against_a_folder_without_tables_needs_new_lake(spark, tmp_path, onboarding, capsys, made):
    """A mistyped --lake passed for a new one: the snapshot was recorded as done, with corrections
    that seed an empty replica, and the real lake never got its deletes."""
    landing, lake = tmp_path / "landing", tmp_path / "typo"
    if made:
        lake.mkdir()
    write_snapshot(landing, "s1", [product(1, "a", 1.0)])
    capsys.readouterr()
    assert main(["snapshot", "reconcile", "--lake", str(lake), "--config", str(onboarding),
                 "--landing", str(landing)]) == 2
    said = " ".join(capsys.readouterr().err.split())  # the console may wrap the line
    assert f"{lake} is not a lake: it holds no tables." in said and "pass --new-lake" in said
    assert not list(landing.rglob("corrections/*"))


def test_reconcile_of_several_snapshots_prints_a_row_for_each(spark, tmp_path, onboarding, capsys):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_snapshot(landing, "s1", [product(1, "a", 1.0)])
    write_snapshot(landing, "s2", [product(1, "a", 2.0)], taken_at=T0 + timedelta(hours=1))
    assert main(["snapshot", "reconcile", "--lake", str(lake), "--new-lake", "--config", str(onboarding),
                 "--landing", str(landing)]) == 0
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in capsys.readouterr().out.splitlines()]
    assert {(row[2], row[3]) for row in cells if len(row) > 3} == {("s1", "skipped"), ("s2", "reconciled")}


def test_job_parameters_parse():
    """The job's task parameters (resources/cdc_lakehouse.job.yml), --catalog instead of --lake."""
    parser = build_parser()
    reconcile_args = parser.parse_args(["snapshot", "reconcile", "--catalog", "main", "--config", "f.yml", "--landing", "/v"])
    hk = parser.parse_args(["housekeeping", "--catalog", "main", "--config", "f.yml", "--landing", "/v",
                            "--retention-hours", "720"])
    assert (reconcile_args.catalog, hk.retention_hours) == ("main", 720.0)
    with pytest.raises(SystemExit):
        parser.parse_args(["snapshot", "reconcile", "--catalog", "c", "--lake", "l", "--landing", "/v"])


@pytest.mark.parametrize(("position", "sequence"), [
    ({"file": "mysql-bin.000002", "pos": 500}, (2 << 32) + 500),
    ({"file": "mysql-bin.000002", "pos": 500, "epoch": 0}, (2 << 32) + 500),
    ({"file": "mysql-bin.000001", "pos": 4, "epoch": 1}, (1 << 52) + (1 << 32) + 4),
])
def test_a_binlog_position_of_a_later_epoch_sorts_after_every_earlier_one(position, sequence):
    from cdc_lakehouse.snapshot.manifest import _position

    problems: list[str] = []
    assert _position(position, problems).sequence_position() == sequence and not problems


def test_a_binlog_position_out_of_range_is_an_invalid_manifest():
    from cdc_lakehouse.snapshot.manifest import _position

    problems: list[str] = []
    _position({"file": "mysql-bin.000001", "pos": 4, "epoch": 5000}, problems)
    assert problems and "epoch 0 to 2047" in problems[0]
