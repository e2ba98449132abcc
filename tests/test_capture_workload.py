"""End to end on live servers: a random multi-user workload, captured while it runs, replayed
independently from the landing files, must equal SELECT * of every source table, and every
transaction must carry the user and role that ran it."""

from __future__ import annotations

import pytest
from live import fixtures, harness, replay


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return harness.live_run(fixtures.postgres(), fixtures.mariadb(),
                            tmp_path_factory.mktemp("landing"), seed=11, n_txns=80,
                            schema=fixtures.unique_schema("shop"))


SOURCES = ["pg_{schema}", "maria_{schema}_shadow", "maria_{schema}"]


def _source(run, pattern):
    schema = next(iter(run.sources.values())).schema
    return run.sources[pattern.format(schema=schema)]


def _replay(run, src):
    fn = replay.replay_shadow if src.kind == "shadow" else replay.replay_binlog
    return fn(run.landing / src.source, src.keys)


@pytest.mark.parametrize("pattern", SOURCES)
def test_replay_equals_select_star(run, pattern):
    src = _source(run, pattern)
    replayed = _replay(run, src)
    for table, rows in run.expected[src.source].items():
        assert harness.canonical(table, replayed.tables[table].values()) == \
            harness.canonical(table, rows), f"{src.source}: {table} differs from SELECT *"


@pytest.mark.parametrize("pattern", SOURCES)
def test_users_and_roles_are_who_ran_each_transaction(run, pattern):
    src = _source(run, pattern)
    replayed = _replay(run, src)
    expected = src.workload.identities
    assert set(replayed.txns_by_marker) == set(expected), "exactly the committed transactions"
    wrong = {no: (who, replayed.who[replayed.txns_by_marker[no]]) for no, who in expected.items()
             if replayed.who[replayed.txns_by_marker[no]] != who}
    assert not wrong, f"{src.source}: (expected, recorded) {wrong}"


def test_workload_exercised_what_it_should(run):
    for src in run.sources.values():
        w = src.workload
        assert len(w.identities) >= 50 and w.rolled_back, "commits and rollbacks"
        assert len({who for who in w.identities.values()}) >= 4, "several users and roles"
    pg = _source(run, SOURCES[0]).workload
    assert any(role is None for _, role in pg.identities.values())
    assert {"app_writer", "support"} <= {r for u, r in pg.identities.values() if u == "alice"}
    # several landing batches per source: captures ran while transactions were open
    for src in run.sources.values():
        folder = run.landing / src.source / ("shadow/_transactions" if src.kind == "shadow" else "binlog")
        assert len(list(folder.glob("*.jsonl"))) >= 3


def test_workload_model_agrees_with_the_database(run):
    """The workload's own bookkeeping is right (so its identities can be trusted)."""
    for src in run.sources.values():
        for table, rows in run.expected[src.source].items():
            model = src.workload.model[table.split(".", 1)[1]].values()
            assert harness.canonical(table, model) == harness.canonical(table, rows)
