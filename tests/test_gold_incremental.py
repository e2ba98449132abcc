"""Gold applies only the changes between the old and the new commit point (gold/coherent.py):
an update reads what the change stream gained, plus what it held back past the point, and
gold stays coherent while a binlog transaction is held."""

from __future__ import annotations

import pytest

from cdc_lakehouse.storage import DeltaRsStore
from silver_support import onboarding_for, run_project
from lake_helpers import write_jsonl
from test_silver_held_state import _event, _transaction

AUDIT_FLOW = "gold_shop_audit_log"
REPLICA_FLOW = "gold_shop_customers"


@pytest.fixture(scope="module")
def updates(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("gold_incremental")
    landing, lake = root / "landing", root / "lake"
    onboarding = onboarding_for(root, {"shop"})
    binlog = landing / "shop" / "binlog"
    runs = []

    def update(files: dict[str, list[dict]]):
        for file, events in files.items():
            write_jsonl(binlog / file, events)
        result = run_project(spark, landing, lake, onboarding)
        store = DeltaRsStore(spark, lake)
        names = {r["customer_id"]: r["name"] for r in store.read("gold.shop_customers").collect()}
        runs.append((result, names, store.read("gold.audit_log").count()))

    # A and C committed, B (between them) open: gold shows A only, and holds C back.
    update({"1.jsonl": _transaction(100, [(1, "ann")]) + _transaction(200, [(2, "bob")], commit=False)
            + _transaction(300, [(3, "cy")])})
    update({"2.jsonl": [_event(290, "commit", xid=200)]})  # B completes: B and C are applied
    update({"3.jsonl": _transaction(400, [(4, "dee")], file="mysql-bin.000002")})
    return runs


def test_gold_holds_back_what_follows_a_held_transaction(updates):
    _, names, audited = updates[0]
    assert names == {1: "ann"}
    assert audited == 1


def test_held_back_changes_are_applied_once_the_point_passes_them(updates):
    result, names, audited = updates[1]
    assert names == {1: "ann", 2: "bob", 3: "cy"}
    assert audited == 3
    # The stream gained B's change only; C's came from the flow's held state.
    assert result.event(AUDIT_FLOW).rows_read == 1


def test_an_update_reads_only_the_new_changes(updates):
    result, names, audited = updates[2]
    assert names == {1: "ann", 2: "bob", 3: "cy", 4: "dee"}
    assert audited == 4
    assert result.event(AUDIT_FLOW).rows_read == 1
    assert result.event(REPLICA_FLOW).rows_read == 1
