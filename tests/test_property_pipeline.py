"""Property: for random small binlog histories, the project pipeline's replicas equal a plain
replay of the committed transactions, after each of two runs.

Hypothesis draws a history of transactions on two tables (``app.t1``: key ``id``, SCD2;
``app.t2``: composite key ``(k1, k2)``, SCD1) over a few keys: inserts, updates (values may be
NULL), deletes, key-changing updates, several operations on one row in a transaction,
rolled-back transactions and a transaction cut in two by the end of the first run's binlog
file (committed in the second run, or never: left open). The ops are made valid for the
simulated source state (an insert of a present key becomes an update, and so on), so the
history is one a database could have written.

The reference is a replay of the binlog events alone: committed transactions in log order,
insert -> put, update -> remove the before key and put the after image, delete -> remove.
Each example costs two pipeline runs (bronze and silver: gold only reads them), so only a handful
of examples run, derandomized (the same ones in every CI run); ``CDC_LAKEHOUSE_HYPOTHESIS=deep``
runs more, with random ones (a bug hunt, not for CI: tests/property_settings.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from property_settings import examples

from cdc_lakehouse.storage import LakeStore
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402

SOURCE = "prop"
KEYS = {"t1": ("id",), "t2": ("k1", "k2")}
COLUMNS = {"t1": ("id", "a", "b"), "t2": ("k1", "k2", "v")}
LAYERS = ("bronze", "silver")
START = 1772442000


def onboarding(path: Path) -> Path:
    flows = []
    for i, (table, scd) in enumerate((("t1", "2"), ("t2", "1"))):
        flows.append({
            "data_flow_id": str(700 + i), "data_flow_group": "prop", "source_format": "cloudFiles",
            "source_details": {"source_database": "app", "source_table": table},
            "bronze_database_dev": "b", "bronze_table": f"{SOURCE}_binlog_events",
            "silver_database_dev": "s", "silver_table": f"{SOURCE}_{table}",
            "silver_cdc_apply_changes": {
                "keys": list(KEYS[table]), "sequence_by": "__sequence", "scd_type": scd,
                "apply_as_deletes": "__op = 'DELETE'",
                "except_column_list": ["__op", "__sequence", "__commit_ts", "__txn_id"]},
            "cdc_lakehouse": {"capture": "binlog", "source": SOURCE},
        })
    path.write_text(yaml.safe_dump(flows))
    return path


# -- histories ---------------------------------------------------------------------------------
intent = st.tuples(
    st.sampled_from(["t1", "t2"]),
    st.sampled_from(["insert", "update", "update", "delete", "rekey"]),
    st.integers(0, 3),  # which key
    st.one_of(st.none(), st.integers(-5, 50)),  # a value (NULL sometimes)
)
transaction = st.tuples(st.lists(intent, min_size=1, max_size=5), st.sampled_from(["commit"] * 4 + ["rollback"]))
history = st.tuples(
    st.lists(transaction, min_size=2, max_size=7),
    st.integers(0, 6),  # the transaction cut by the end of the first file
    st.booleans(),  # does the cut transaction ever commit (second file)?
)


def _key_of(table, n):
    return (n,) if table == "t1" else (n % 2, n // 2)


def _image(table, key, value, salt):
    if table == "t1":
        return {"id": key[0], "a": value, "b": None if value is None else f"s{salt}"}
    return {"k1": key[0], "k2": key[1], "v": value}


def materialize(txns):
    """Valid row operations for the intents, simulated against the source state."""
    state = {"t1": {}, "t2": {}}
    out = []
    for t_index, (intents, outcome) in enumerate(txns):
        work = {t: dict(rows) for t, rows in state.items()}
        ops = []
        for j, (table, kind, n, value) in enumerate(intents):
            rows, key = work[table], _key_of(table, n)
            salt = t_index * 10 + j
            if kind == "insert" and key in rows:
                kind = "update"
            if kind in ("update", "delete", "rekey") and key not in rows:
                kind = "insert"
            if kind == "insert":
                rows[key] = _image(table, key, value, salt)
                ops.append((table, "insert", None, rows[key]))
            elif kind == "update":
                before = rows[key]
                after = {**_image(table, key, value, salt)}
                if after == before:
                    after = {**after, COLUMNS[table][-1]: f"u{salt}" if table == "t1" else (value or 0) + 1000}
                rows[key] = after
                ops.append((table, "update", before, after))
            elif kind == "delete":
                ops.append((table, "delete", rows.pop(key), None))
            else:  # key-changing update to the first free key
                free = [k for k in (_key_of(table, m) for m in range(6)) if k not in rows]
                before = rows.pop(key)
                new_key = free[0]
                after = {**before, **dict(zip(KEYS[table], new_key))}
                rows[new_key] = after
                ops.append((table, "update", before, after))
        if outcome == "commit":
            state = work
        out.append((ops, outcome))
    return out


def binlog_files(txns, cut: int, cut_commits: bool) -> tuple[list[dict], list[dict]]:
    """Events in two files; the ``cut``-th transaction begins in the first and ends in the
    second (or never ends, when it does not commit and is the last one)."""
    cut = min(cut, len(txns) - 1)
    first, second = [], []
    pos = {"mysql-bin.000001": 256, "mysql-bin.000002": 256}

    def emit(target, name, etype, **kw):
        ev = {"server_id": 1, "file": name, "pos": pos[name], "ts": START + len(first) + len(second), "gtid": None,
              "type": etype, "xid": None, "thread_id": None, "schema": None, "table": None,
              "primary_key": None, "rows": None, "query": None, **kw}
        pos[name] += 100
        target.append(ev)

    for i, (ops, outcome) in enumerate(txns):
        if i == cut and not cut_commits:
            outcome = "open"
        target, name = (first, "mysql-bin.000001") if i <= cut else (second, "mysql-bin.000002")
        emit(target, name, "begin", thread_id=5, gtid=f"0-1-{i + 1}")
        for j, (table, kind, before, after) in enumerate(ops):
            if i == cut and j == (len(ops) + 1) // 2:
                target, name = second, "mysql-bin.000002"
            image = {k: v for k, v in (("before", before), ("after", after)) if v is not None}
            emit(target, name, kind, schema="app", table=table, primary_key=list(KEYS[table]), rows=[image], gtid=f"0-1-{i + 1}")
        if i == cut:
            target, name = second, "mysql-bin.000002"
        if outcome == "commit":
            emit(target, name, "commit", xid=100 + i, gtid=f"0-1-{i + 1}")
        elif outcome == "rollback":
            emit(target, name, "rollback", gtid=f"0-1-{i + 1}")
        if outcome == "open":  # never ends: everything after it would be inside it; stop here
            break
    return first, second


def replay(events: list[dict]) -> dict[str, dict[tuple, dict]]:
    """The reference: committed transactions of the log, applied in log order."""
    state = {"t1": {}, "t2": {}}
    pending = None
    for ev in sorted(events, key=lambda e: (e["file"], e["pos"])):
        if ev["type"] == "begin":
            pending = []
        elif ev["type"] in ("insert", "update", "delete"):
            pending.append(ev)
        elif ev["type"] == "commit":
            for row_event in pending:
                t = state[row_event["table"]]
                for image in row_event["rows"]:
                    if "before" in image:
                        t.pop(tuple(image["before"][k] for k in KEYS[row_event["table"]]), None)
                    if "after" in image:
                        t[tuple(image["after"][k] for k in KEYS[row_event["table"]])] = image["after"]
            pending = None
        elif ev["type"] == "rollback":
            pending = None
    return state


def _normal(row: dict, table: str) -> str:
    return json.dumps({c: row.get(c) for c in COLUMNS[table]}, sort_keys=True)


def assert_replicas_equal_replay(spark, lake: Path, events: list[dict], when: str) -> None:
    store = LakeStore(spark, lake)
    expected = replay(events)
    for table in ("t1", "t2"):
        name = f"silver.{SOURCE}_{table}"
        rows = [r.asDict() for r in store.read(name).collect()] if store.exists(name) else []
        got = sorted(_normal(r, table) for r in rows)
        want = sorted(_normal(r, table) for r in expected[table].values())
        assert got == want, f"{when}: {name}\n got  {got}\n want {want}\n events {json.dumps(events)}"
    history = f"silver.{SOURCE}_t1_history"
    if store.exists(history):
        current = [r.asDict() for r in store.read(history).filter("__END_AT IS NULL").collect()]
        assert sorted(_normal(r, "t1") for r in current) == sorted(_normal(r, "t1") for r in expected["t1"].values()), \
            f"{when}: open SCD2 versions differ from the current state"


def _write(path: Path, events: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


# No shrinking: every step would cost two pipeline runs; the failure message has the events.
@settings(max_examples=examples(3), phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(history)
def test_replicas_equal_a_replay_of_committed_transactions(spark, tmp_path_factory, drawn):
    txns, cut, cut_commits = drawn
    ops = materialize(txns)
    first, second = binlog_files(ops, cut + 1, cut_commits)
    tmp = tmp_path_factory.mktemp("prop")
    landing, lake, onb = tmp / "landing", tmp / "lake", onboarding(tmp / "onboarding.yml")
    _write(landing / SOURCE / "binlog" / "mysql-bin.000001.jsonl", first)
    harness.run_project(spark, landing, lake, onb, layers=LAYERS)
    assert_replicas_equal_replay(spark, lake, first, "after run 1")
    _write(landing / SOURCE / "binlog" / "mysql-bin.000002.jsonl", second)
    harness.run_project(spark, landing, lake, onb, layers=LAYERS)
    assert_replicas_equal_replay(spark, lake, first + second, "after run 2")


def test_a_table_without_changes_yet_waits_and_then_gets_every_later_change(spark, tmp_path):
    """Run 1 changes only t1; t2's changes arrive in runs 2 and 3 and must all be applied (its
    empty first batch neither fails the update nor holds its stream at that batch)."""
    ops = materialize([
        ([("t1", "insert", 0, 1), ("t1", "insert", 1, 2)], "commit"),
        ([("t2", "insert", 0, 1), ("t1", "update", 0, 5)], "commit"),
        ([("t2", "update", 0, 7), ("t2", "insert", 1, 3)], "commit"),
    ])
    first, second = binlog_files(ops, len(ops) - 1, True)
    log = first + second
    ends = [i + 1 for i, e in enumerate(log) if e["type"] == "commit"]  # one landing file per transaction
    landing, lake, onb = tmp_path / "landing", tmp_path / "lake", onboarding(tmp_path / "onboarding.yml")
    runs = [(f"txn-{n}.jsonl", log[a:b]) for n, (a, b) in enumerate(zip([0, *ends], ends), 1)]
    seen = []
    for n, (name, events) in enumerate(runs, 1):
        _write(landing / SOURCE / "binlog" / name, events)
        harness.run_project(spark, landing, lake, onb, layers=LAYERS)
        seen += events
        assert_replicas_equal_replay(spark, lake, seen, f"after run {n}")
