"""Housekeeping after real pipeline updates: landing files are archived only once every reading
flow committed them, shadow sources get their acknowledgement, and the pipeline carries on."""

from __future__ import annotations

import contextlib
import io
import json
from datetime import timedelta

import pytest
import yaml
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cli import main
from cdc_lakehouse.housekeeping.summary import housekeeping_summary
from cdc_lakehouse.storage import LakeStore
from lake_helpers import write_jsonl
from silver_support import onboarding_for
from test_snapshot_support import T0, Binlog, product, products, reconcile, run, write_snapshot


def products_of_both_sources(tmp_path):
    path = onboarding_for(tmp_path, {"shop", "shop_pg"})
    flows = [f for f in yaml.safe_load(path.read_text()) if f["source_details"]["source_table"] == "products"]
    path.write_text(yaml.safe_dump(flows))
    return path


def shadow_landing(landing):
    """Two committed transactions, and one held: its change row landed, its transaction row not."""
    at = lambda s: (T0 + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
    write_jsonl(landing / "shop_pg/shadow/_transactions/txns-1.jsonl", [
        {"txn_id": "t1", "end_ts": at(1), "db_user": "app", "db_role": "writer"},
        {"txn_id": "t2", "end_ts": at(5), "db_user": "app", "db_role": "writer"},
    ])
    write_jsonl(landing / "shop_pg/shadow/shop.products/changes-1.jsonl", [
        {"txn_id": "t1", "op_ts": at(0.5), "op_seq": 1, "op": "I", "key": {"product_id": 1}, "values": product(1, "a", 1.0)},
        {"txn_id": "t2", "op_ts": at(4), "op_seq": 1, "op": "U", "key": {"product_id": 1}, "values": {"price": 2.0}},
        {"txn_id": "held", "op_ts": at(3), "op_seq": 1, "op": "I", "key": {"product_id": 2}, "values": product(2, "b", 1.0)},
    ])


@pytest.fixture(scope="module")
def kept_house(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("housekeeping")
    landing, lake, onboarding = tmp / "landing", tmp / "lake", products_of_both_sources(tmp)
    log = Binlog()
    p1 = log.txn(1, ("insert", product(1, "a", 1.0)), ("insert", product(2, "b", 2.0)))
    log.write(landing, "mysql-bin.000001.jsonl")
    write_snapshot(landing, "s1", [product(1, "a", 1.0), product(2, "b", 2.5)], position=p1)
    shadow_landing(landing)
    reconcile(spark, landing, lake, onboarding)
    run(spark, landing, lake, onboarding)

    log.txn(2, ("delete", product(2, "b", 2.5)))
    log.write(landing, "mysql-bin.000002.jsonl")
    write_snapshot(landing, "s2", [product(1, "a", 1.0)], taken_at=T0 + timedelta(hours=1))  # not reconciled yet
    run(spark, landing, lake, onboarding)
    log.txn(3, ("insert", product(3, "c", 3.0)))
    log.write(landing, "mysql-bin.000003.jsonl")  # landed after the last update: not read yet
    argv = ["housekeeping", "--lake", str(lake), "--config", str(onboarding), "--landing", str(landing),
            "--retention-hours", "0", "--allow-short-retention", "--archive-after-hours", "0", "--json"]
    return dict(landing=landing, lake=lake, onboarding=onboarding, argv=argv)


@pytest.fixture(scope="module")
def report(kept_house):
    return housekeep(kept_house["argv"])


def housekeep(argv) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


def relative(files, landing):
    return sorted(str(p.relative_to(landing)) for p in files)


def test_committed_files_are_archived_the_others_stay(kept_house, report):
    landing = kept_house["landing"]
    assert relative((landing / "shop/_archive").rglob("*.json*"), landing) == [
        "shop/_archive/binlog/mysql-bin.000001.jsonl", "shop/_archive/binlog/mysql-bin.000002.jsonl",
        "shop/_archive/corrections/shop.products/s1.jsonl",
        "shop/_archive/snapshot/shop.products/s1/_manifest.json",
        "shop/_archive/snapshot/shop.products/s1/part-00000.jsonl",
    ]
    left = relative((p for p in (landing / "shop").rglob("*") if p.is_file() and "_archive" not in p.parts), landing)
    assert left == [
        "shop/binlog/mysql-bin.000003.jsonl",  # not read by any update yet
        "shop/corrections/shop.products/_s1.status.json",
        "shop/snapshot/shop.products/s2/_manifest.json", "shop/snapshot/shop.products/s2/part-00000.jsonl",  # not reconciled
    ]
    assert report["archive"]["result"]["kept"] == {
        "not committed by every flow reading it": 1, "snapshot not reconciled yet": 2}
    assert relative((landing / "shop_pg/_archive").rglob("*.jsonl"), landing) == [
        "shop_pg/_archive/shadow/_transactions/txns-1.jsonl", "shop_pg/_archive/shadow/shop.products/changes-1.jsonl"]


def test_shadow_source_gets_its_acknowledgement(kept_house, report):
    ack = json.loads((kept_house["landing"] / "shop_pg/_ack.json").read_text())
    assert ack["applied_through"]["txn_id"] == "t2" and ack["applied_through"]["end_ts"] == "2026-03-01T12:00:05.000000Z"
    # "held" has no transaction row yet; its first operation (12:00:03) caps what may be purged.
    assert (ack["watermark_end_ts"], ack["held_transactions"]) == ("2026-03-01T12:00:02.999999Z", 1)
    assert not (kept_house["landing"] / "shop/_ack.json").exists()  # binlog sources get none


def test_streamed_tables_are_vacuumed_not_optimized(report):
    results = {r["table"]: r for r in report["optimize"]["result"]}
    assert results["silver.shop_changes"]["optimize"].startswith("skipped: read as a stream by")
    assert results["bronze.shop_binlog_events"]["optimize"].startswith("skipped: read as a stream by")
    assert isinstance(results["silver.shop_products"]["optimize"], dict)
    assert report["compaction"]["result"][0]["table"] == "silver.shop_changes_compacted"


def test_the_summary_says_what_each_step_did_in_one_line(report):
    """Without --json the command printed the whole report: hundreds of lines, one per table."""
    lines = {step: done for step, _, done in housekeeping_summary(report)}
    assert list(lines) == ["compaction", "tombstones", "archive", "acks", "optimize"]
    assert lines["archive"] == ("7 landing files archived; kept: 1 not committed by every flow reading it, "
                                "2 snapshot not reconciled yet")
    assert lines["acks"] == "shop_pg: acknowledged through 2026-03-01T12:00:05.000000Z"
    assert lines["compaction"].startswith("silver.shop_changes_compacted ")
    optimized = sum(isinstance(r["optimize"], dict) for r in report["optimize"]["result"])
    assert lines["optimize"].startswith(f"{optimized} tables optimized (")
    assert housekeeping_summary({"acks": {"skipped": "--skip"}}) == [("acks", "", "skipped: --skip")]


def test_the_pipeline_carries_on_after_housekeeping(spark, kept_house, report):
    """Later updates read only what is new; archived files are not missed, and reconcile does
    not compare an archived snapshot again."""
    landing, lake, onboarding = kept_house["landing"], kept_house["lake"], kept_house["onboarding"]
    assert [o.snapshot_id for o in reconcile(spark, landing, lake, onboarding) if o.status == "reconciled"] == ["s2"]
    run(spark, landing, lake, onboarding)
    store = LakeStore(spark, lake)
    # s2 (as of now, after everything silver had) holds only key 1; key 3 arrived after it.
    assertDataFrameEqual(store.read("silver.shop_products"), products(spark, [(1, "a", 1.0), (3, "c", 3.0)]))
    housekeep(kept_house["argv"] + ["--skip", "optimize"])
    assert (landing / "shop/_archive/binlog/mysql-bin.000003.jsonl").exists()
