"""Tests of the shop demo workload generator (cdc_lakehouse.demo.shop_workload).

Pure standard library: the landing files are read back and replayed independently of the
generator's internals, following shared/design/CONTRACT.md.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from cdc_lakehouse.demo import shop_workload as sw  # noqa: E402

FIXTURES = ROOT / "fixtures"
OWNED_TREES = ("landing/shop", "landing/shop_pg", "expected/shop", "expected/shop_pg")
KEYS = {
    "shop.customers": ("customer_id",),
    "shop.products": ("product_id",),
    "shop.orders": ("order_id",),
    "shop.order_items": ("order_id", "line_no"),
}
ROW_TYPES = ("insert", "update", "delete")
EVENT_FIELDS = ["server_id", "file", "pos", "ts", "gtid", "type", "xid", "thread_id", "schema",
                "table", "primary_key", "rows", "query"]
ALLOWED_CELLS = {"IU": "I", "ID": None, "UU": "U", "UD": "D", "DI": "U"}


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line, parse_float=Decimal) for line in f if line.strip()]


def tree_bytes(root: Path, sub: str) -> dict[str, bytes]:
    base = root / sub
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(base.rglob("*")) if p.is_file()}


def file_num(name: str) -> int:
    return int(re.search(r"\.(\d+)(?:\.jsonl)?$", name).group(1))


def chunk_num(name: str) -> int:
    return int(re.search(r"-(\d+)\.jsonl$", name).group(1))


def epoch_s(iso: str) -> int:
    return int(datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())


def key_of(table: str, row: dict) -> tuple:
    return tuple(row[c] for c in KEYS[table])


def load_binlog(root: Path) -> list[dict]:
    events = []
    for p in sorted((root / "landing/shop/binlog").glob("*.jsonl"), key=lambda p: file_num(p.name)):
        events += read_jsonl(p)
    return events


def binlog_txns(events: list[dict]) -> list[dict]:
    """Group events in log order into transactions, asserting they are well formed."""
    txns, cur = [], None
    for ev in sorted(events, key=lambda e: (file_num(e["file"]), e["pos"])):
        t = ev["type"]
        if t == "begin":
            assert cur is None, f"nested begin at {ev['file']}:{ev['pos']}"
            assert ev["thread_id"] is not None
            cur = {"begin": ev, "rows": [], "end": None, "gtid": ev["gtid"]}
        elif t in ROW_TYPES:
            assert cur is not None, f"row event outside a transaction at {ev['file']}:{ev['pos']}"
            assert ev["gtid"] == cur["gtid"]
            assert ev["schema"] == "shop" and ev["table"] and ev["rows"]
            assert ev["primary_key"] == list(KEYS[f"shop.{ev['table']}"])
            for r in ev["rows"]:
                want = {"insert": {"after"}, "update": {"before", "after"}, "delete": {"before"}}[t]
                assert set(r) == want, (t, r)
            cur["rows"].append(ev)
        elif t in ("commit", "rollback"):
            assert cur is not None, f"{t} outside a transaction at {ev['file']}:{ev['pos']}"
            assert ev["gtid"] == cur["gtid"]
            if t == "rollback":
                assert ev["xid"] is None
            cur["end"] = ev
            txns.append(cur)
            cur = None
        elif t == "ddl":
            assert cur is None, "ddl inside a transaction"
            assert ev["query"] and ev["schema"] and ev["table"]
            txns.append({"begin": ev, "rows": [], "end": ev, "gtid": ev["gtid"]})
        else:
            raise AssertionError(f"unknown event type {t}")
        if t != "begin":
            assert ev["thread_id"] is None or t == "ddl"
        if t != "commit":
            assert ev["xid"] is None
        if t != "ddl":
            assert ev["query"] is None
    assert cur is None, "binlog ends inside an open transaction"
    return txns


def row_ops(txn: dict) -> list[tuple[str, str, dict | None, dict | None]]:
    out = []
    for ev in txn["rows"]:
        for r in ev["rows"]:
            out.append((f"shop.{ev['table']}", ev["type"], r.get("before"), r.get("after")))
    return out


def load_expected(root: Path, source: str) -> dict[str, dict[tuple, dict]]:
    out = {}
    for table in KEYS:
        rows = read_jsonl(root / f"expected/{source}/{table}.jsonl")
        keys = [key_of(table, r) for r in rows]
        assert keys == sorted(keys), f"expected/{source}/{table} is not sorted by key"
        out[table] = dict(zip(keys, rows))
    return out


def replay_binlog(root: Path) -> dict[str, dict[tuple, dict]]:
    state: dict[str, dict[tuple, dict]] = {t: {} for t in KEYS}
    for txn in binlog_txns(load_binlog(root)):
        end = txn["end"]
        if end["type"] == "rollback":
            continue
        if end["type"] == "ddl":
            m = re.match(r"ALTER TABLE (\w+\.\w+) ADD COLUMN (\w+)", end["query"])
            if m:
                for k, r in state[m.group(1)].items():
                    state[m.group(1)][k] = {**r, m.group(2): None}
            continue
        for table, kind, before, after in row_ops(txn):
            rows = state[table]
            if kind == "insert":
                k = key_of(table, after)
                assert k not in rows, (table, k)
                rows[k] = after
            elif kind == "update":
                k = key_of(table, before)
                assert rows.get(k) == before, f"stale before image {table} {k}"
                del rows[k]
                nk = key_of(table, after)
                assert nk not in rows
                rows[nk] = after
            else:
                k = key_of(table, before)
                assert rows.get(k) == before, f"stale before image {table} {k}"
                del rows[k]
    return state


def load_shadow(root: Path):
    base = root / "landing/shop_pg/shadow"
    txn_rows = []
    for p in sorted((base / "_transactions").glob("*.jsonl")):
        txn_rows += [dict(r, _file=p.name) for r in read_jsonl(p)]
    changes = {}
    for table in KEYS:
        rows = []
        for p in sorted((base / table).glob("*.jsonl")):
            rows += [dict(r, _file=p.name) for r in read_jsonl(p)]
        changes[table] = rows
    return txn_rows, changes


def replay_shadow(root: Path) -> dict[str, dict[tuple, dict]]:
    txn_rows, changes = load_shadow(root)
    end_ts: dict[str, str] = {}
    for r in txn_rows:  # the latest end_ts wins
        end_ts[r["txn_id"]] = max(end_ts.get(r["txn_id"], ""), r["end_ts"])
    assert len(set(end_ts.values())) == len(end_ts), "shadow commit times must not tie"
    ops = []
    for table, rows in changes.items():
        for r in rows:
            assert r["txn_id"] in end_ts, f"change row of unknown transaction {r['txn_id']}"
            ops.append((end_ts[r["txn_id"]], r["op_seq"], table, r))
    ops.sort(key=lambda o: (o[0], o[1]))
    state: dict[str, dict[tuple, dict]] = {t: {} for t in KEYS}
    for _, _, table, r in ops:
        rows = state[table]
        key = tuple(r["key"][c] for c in KEYS[table])
        assert list(r["key"]) == list(KEYS[table])
        if r["op"] == "I":
            assert r["old_key"] is None and key not in rows
            assert key_of(table, r["values"]) == key
            rows[key] = dict(r["values"])
        elif r["op"] == "U":
            old = key if r["old_key"] is None else tuple(r["old_key"][c] for c in KEYS[table])
            assert (r["old_key"] is None) or old != key
            cur = rows.pop(old)
            assert r["values"], "an update must change something"
            for c, v in r["values"].items():
                assert c in cur and cur[c] != v, f"U carries an unchanged column {c}"
            new = {**cur, **r["values"]}
            assert key_of(table, new) == key
            assert key not in rows
            rows[key] = new
        else:
            assert r["op"] == "D" and r["values"] is None and r["old_key"] is None
            del rows[key]
    return state


def fold_cells(seq_by_key: dict) -> dict[str, int]:
    """Fold each key's op sequence per CONTRACT §3; impossible pairs fail the test."""
    cells: dict[str, int] = {}
    for key, seq in seq_by_key.items():
        net = None
        for op in seq:
            if net is None:
                net = op
                continue
            cell = net + op
            assert cell in ALLOWED_CELLS, f"impossible combination {cell} on {key}"
            cells[cell] = cells.get(cell, 0) + 1
            net = ALLOWED_CELLS[cell]
    return cells


def binlog_cells(root: Path) -> dict[str, int]:
    cells: dict[str, int] = {}
    for n, txn in enumerate(binlog_txns(load_binlog(root))):
        if txn["end"]["type"] != "commit":
            continue
        seq: dict = {}
        for table, kind, before, after in row_ops(txn):
            if kind == "update":
                ko, kn = key_of(table, before), key_of(table, after)
                if ko != kn:  # a key change is a DELETE of the old key and an INSERT of the new
                    seq.setdefault((n, table, ko), []).append("D")
                    seq.setdefault((n, table, kn), []).append("I")
                else:
                    seq.setdefault((n, table, kn), []).append("U")
            elif kind == "insert":
                seq.setdefault((n, table, key_of(table, after)), []).append("I")
            else:
                seq.setdefault((n, table, key_of(table, before)), []).append("D")
        for c, v in fold_cells(seq).items():
            cells[c] = cells.get(c, 0) + v
    return cells


def resolve_user(sessions: list[dict], thread_id: int, begin_ts: int) -> tuple[str, str]:
    best = None
    for s in sessions:
        t = epoch_s(s["connected_at"])
        if s["thread_id"] == thread_id and t < begin_ts and (best is None or t >= best[0]):
            best = (t, s["user"], s["role"])
    return (best[1], best[2]) if best else ("unknown", "unknown")


# ------------------------------------------------------------------------------------------
# fixtures
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gen(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("shop_a")
    sw.write_landing(d)
    return d


@pytest.fixture(scope="module")
def events(gen):
    return load_binlog(gen)


@pytest.fixture(scope="module")
def txns(events):
    return binlog_txns(events)


@pytest.fixture(scope="module")
def sessions(gen):
    return read_jsonl(gen / "landing/shop/sessions/sessions-0001.jsonl")


# ------------------------------------------------------------------------------------------
# determinism and freshness
# ------------------------------------------------------------------------------------------


def test_deterministic(gen, tmp_path):
    sw.write_landing(tmp_path)
    for sub in OWNED_TREES:
        first = tree_bytes(gen, sub)
        assert first and first == tree_bytes(tmp_path, sub)


def test_other_seed_differs_and_rewrite_removes_stale(tmp_path):
    sw.write_landing(tmp_path, seed=7, n_txns=400)
    assert (tmp_path / "landing/shop/binlog/mysql-bin.000004.jsonl").exists()
    sw.write_landing(tmp_path, seed=7, n_txns=300)
    assert not (tmp_path / "landing/shop/binlog/mysql-bin.000004.jsonl").exists()
    other = tmp_path / "other"
    sw.write_landing(other, seed=8)
    assert tree_bytes(tmp_path, "expected/shop") != tree_bytes(other, "expected/shop")


def test_fixtures_are_fresh(gen):
    """fixtures/ must equal a fresh generation (regenerate with the CLI if this fails)."""
    hint = "run: PYTHONPATH=src python -m cdc_lakehouse.demo.shop_workload --out fixtures"
    for sub in OWNED_TREES:
        fresh, stored = tree_bytes(gen, sub), tree_bytes(FIXTURES, sub)
        assert sorted(stored) == sorted(fresh), hint
        for rel in fresh:
            assert stored[rel] == fresh[rel], f"{rel} is stale; {hint}"


def test_cli(tmp_path):
    assert sw.main(["--out", str(tmp_path), "--txns", "200", "--seed", "3"]) == 0
    assert (tmp_path / "expected/shop/shop.orders.jsonl").exists()
    assert (tmp_path / "landing/shop_pg/shadow/_transactions/txns-0001.jsonl").exists()


def test_small_and_utf8(gen):
    total = sum(len(b) for sub in OWNED_TREES for b in tree_bytes(gen, sub).values())
    assert total < 2_000_000
    text = (gen / "expected/shop/shop.customers.jsonl").read_text(encoding="utf-8")
    assert re.search(r"[^\x00-\x7f]", text), "names/cities should exercise UTF-8"


def test_decimals_have_two_places(gen):
    text = "".join(p.read_text(encoding="utf-8") for p in (gen / "landing").rglob("*.jsonl"))
    amounts = re.findall(r'"(?:price|total)":(-?[0-9.]+)', text)
    assert amounts and all(re.fullmatch(r"\d+\.\d\d", a) for a in amounts)


# ------------------------------------------------------------------------------------------
# binlog form
# ------------------------------------------------------------------------------------------


def test_binlog_event_shape(gen, events):
    files = sorted((gen / "landing/shop/binlog").glob("*.jsonl"))
    assert [p.name for p in files] == [f"mysql-bin.{i:06d}.jsonl" for i in range(1, len(files) + 1)]
    assert len(files) >= 3
    for p in files:
        for ev in read_jsonl(p):
            assert list(ev) == EVENT_FIELDS
            assert ev["file"] == p.name[: -len(".jsonl")]
            assert ev["server_id"] == 1 and isinstance(ev["ts"], int)
            assert ev["gtid"] is None or re.fullmatch(r"0-1-\d+", ev["gtid"])


def test_binlog_positions_strictly_increasing(gen, events):
    prev = None
    for p in sorted((gen / "landing/shop/binlog").glob("*.jsonl"), key=lambda p: file_num(p.name)):
        for ev in read_jsonl(p):  # the order inside the files is the log order
            cur = (file_num(ev["file"]), ev["pos"])
            assert prev is None or cur > prev, f"position not increasing at {cur}"
            prev = cur


def test_binlog_transactions_well_formed(txns):
    assert len(txns) == 300
    gtids = [t["gtid"] for t in txns if t["gtid"] is not None]
    assert len(gtids) == len(set(gtids))
    xids = [t["end"]["xid"] for t in txns if t["end"]["xid"] is not None]
    assert len(xids) == len(set(xids))
    for t in txns:
        if t["end"]["type"] != "ddl":
            assert t["rows"], "every DML transaction has row events"


def test_replay_binlog_gives_expected(gen):
    assert replay_binlog(gen) == load_expected(gen, "shop")


def test_snapshot(gen, txns):
    snap = gen / "landing/shop/snapshot/shop.products/snap-0001"
    manifest = json.loads((snap / "_manifest.json").read_text(encoding="utf-8"))
    assert set(manifest) == {"snapshot_id", "table", "key", "taken_at", "position", "row_count",
                             "complete"}
    last_commit = [t["end"] for t in txns if t["end"]["type"] == "commit"][-1]
    assert manifest["position"] == {"file": last_commit["file"], "pos": last_commit["pos"]}
    assert manifest["complete"] is True and manifest["table"] == "shop.products"
    assert manifest["key"] == ["product_id"] and manifest["snapshot_id"] == "snap-0001"
    rows = read_jsonl(snap / "part-00000.jsonl")
    assert manifest["row_count"] == len(rows)
    assert {key_of("shop.products", r): r for r in rows} == load_expected(gen, "shop")["shop.products"]


def test_sessions_attribute_every_transaction(sessions, txns):
    assert all(set(s) == {"server_id", "thread_id", "connected_at", "user", "role"} for s in sessions)
    intended = sw.generate()
    assert len(intended.txns) == len(txns)
    users = set()
    for want, t in zip(intended.txns, txns):
        got = resolve_user(sessions, t["begin"]["thread_id"], t["begin"]["ts"])
        assert got == (want.user, want.role), (want.index, got)
        users.add(got)
    assert {u for u, _ in users} == {"alice", "bob", "carol", "dave", "etl", "unknown"}


def test_thread_ids_reused_by_other_users(sessions, txns):
    owners: dict[int, list[str]] = {}
    for s in sessions:
        owners.setdefault(s["thread_id"], []).append(s["user"])
    reused = [tid for tid, us in owners.items() if len(set(us)) > 1]
    assert reused
    # the reuse matters: some reused thread ran transactions of two different users
    by_thread: dict[int, set] = {}
    for t in txns:
        tid = t["begin"]["thread_id"]
        by_thread.setdefault(tid, set()).add(resolve_user(sessions, tid, t["begin"]["ts"])[0])
    assert any(len(by_thread.get(tid, ())) > 1 for tid in reused)
    # users reconnect over time on new thread ids
    per_user: dict[str, set] = {}
    for s in sessions:
        per_user.setdefault(s["user"], set()).add(s["thread_id"])
    assert sum(len(v) > 1 for v in per_user.values()) >= 3


# ------------------------------------------------------------------------------------------
# shadow form
# ------------------------------------------------------------------------------------------


def test_shadow_row_shapes(gen):
    txn_rows, changes = load_shadow(gen)
    columns = {t: list(next(iter(rows.values()))) for t, rows in load_expected(gen, "shop_pg").items()}
    for r in txn_rows:
        assert set(r) - {"_file"} == {"txn_id", "end_ts", "db_user", "db_role", "client", "application"}
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", r["end_ts"])
        assert isinstance(r["txn_id"], str)
    for table, rows in changes.items():
        assert rows, table
        for r in rows:
            assert list(r)[:-1] == ["txn_id", "op_ts", "op_seq", "op", "key", "old_key", "values"]
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", r["op_ts"])
            if r["op"] == "I":
                assert list(r["values"]) == columns[table]
    # op_seq numbers the operations of each transaction 1..n
    seqs: dict[str, list[int]] = {}
    for rows in changes.values():
        for r in rows:
            seqs.setdefault(r["txn_id"], []).append(r["op_seq"])
    for tid, s in seqs.items():
        assert sorted(s) == list(range(1, len(s) + 1)), tid


def test_replay_shadow_gives_expected(gen):
    assert replay_shadow(gen) == load_expected(gen, "shop_pg")


def test_shadow_has_no_phone_and_matches_binlog_state(gen):
    shop, pg = load_expected(gen, "shop"), load_expected(gen, "shop_pg")
    assert all("phone" in r for r in shop["shop.customers"].values())
    for table in KEYS:
        assert {k: {c: v for c, v in r.items() if c != "phone"} for k, r in shop[table].items()} == pg[table]


def test_shadow_records_only_committed(gen, txns):
    txn_rows, changes = load_shadow(gen)
    committed_dml = [t for t in txns if t["end"]["type"] == "commit"]
    assert len({r["txn_id"] for r in txn_rows}) == len(committed_dml)
    for table in KEYS:
        binlog_ops = sum(len(ev["rows"]) for t in committed_dml for ev in t["rows"]
                         if f"shop.{ev['table']}" == table)
        assert binlog_ops == len(changes[table])


# ------------------------------------------------------------------------------------------
# required features
# ------------------------------------------------------------------------------------------


def _commit_ends(txns):
    return [t for t in txns if t["end"]["type"] in ("commit", "ddl")]


def _touched(t) -> set:
    out = set()
    for table, _, before, after in row_ops(t):
        for r in (before, after):
            if r is not None:
                out.add((table, key_of(table, r)))
    return out


def test_feature_same_second_commits(txns):
    ends = _commit_ends(txns)
    pairs = [(a, b) for a, b in zip(ends, ends[1:]) if a["end"]["ts"] == b["end"]["ts"]]
    assert pairs
    # at least one tie is between two transactions changing the same row: only the log
    # position can order them
    assert any(_touched(a) & _touched(b) for a, b in pairs)


def test_feature_clock_step_back(txns):
    ends = _commit_ends(txns)
    steps = [(a, b) for a, b in zip(ends, ends[1:]) if b["end"]["ts"] < a["end"]["ts"]]
    assert steps
    assert any(_touched(a) & _touched(b) for a, b in steps)


def test_feature_rollback(txns):
    rolled = [t for t in txns if t["end"]["type"] == "rollback"]
    assert len(rolled) >= 2 and all(t["rows"] for t in rolled)


def test_feature_ddl(txns):
    ddls = [t["end"] for t in txns if t["end"]["type"] == "ddl"]
    assert len(ddls) >= 2
    assert any(d["query"] == "ALTER TABLE shop.customers ADD COLUMN phone varchar(20)" for d in ddls)
    seen_ddl = False
    for t in txns:
        if t["end"]["type"] == "ddl" and "ADD COLUMN phone" in t["end"]["query"]:
            seen_ddl = True
        for table, _, before, after in row_ops(t):
            if table == "shop.customers":
                for r in (before, after):
                    if r is not None:
                        assert ("phone" in r) == seen_ddl


def test_feature_commit_without_xid_and_gtid_gaps(txns):
    assert any(t["end"]["type"] == "commit" and t["end"]["xid"] is None for t in txns)
    assert any(t["gtid"] is None for t in txns)
    assert sum(t["gtid"] is not None for t in txns) > 0.9 * len(txns)
    # a transaction with neither xid nor gtid needs a generated identity
    assert any(t["end"]["type"] == "commit" and t["end"]["xid"] is None and t["gtid"] is None
               for t in txns)


def test_feature_multi_table_and_multi_row(txns):
    assert sum(len({ev["table"] for ev in t["rows"]}) > 1 for t in txns) >= 10
    assert any(len(ev["rows"]) > 1 for t in txns for ev in t["rows"])


def test_feature_same_row_combinations_binlog(gen):
    cells = binlog_cells(gen)
    assert set(cells) >= {"IU", "UU", "UD", "ID", "DI"}


def test_feature_same_row_combinations_shadow(gen):
    _, changes = load_shadow(gen)
    seq: dict = {}
    for table, rows in changes.items():
        for r in sorted(rows, key=lambda r: (r["txn_id"], r["op_seq"])):
            key = tuple(r["key"][c] for c in KEYS[table])
            if r["op"] == "U" and r["old_key"] is not None:
                old = tuple(r["old_key"][c] for c in KEYS[table])
                seq.setdefault((r["txn_id"], table, old), []).append("D")
                seq.setdefault((r["txn_id"], table, key), []).append("I")
            else:
                seq.setdefault((r["txn_id"], table, key), []).append(r["op"])
    assert set(fold_cells(seq)) >= {"IU", "UU", "UD", "ID", "DI"}


def test_feature_key_changes(gen, txns):
    changed = set()
    for t in txns:
        for table, kind, before, after in row_ops(t):
            if kind == "update" and key_of(table, before) != key_of(table, after):
                changed.add(table)
    assert {"shop.customers", "shop.order_items"} <= changed
    _, changes = load_shadow(gen)
    assert any(r["old_key"] for r in changes["shop.customers"])
    assert any(r["old_key"] for r in changes["shop.order_items"])


def test_feature_explicit_null_in_shadow_update(gen):
    _, changes = load_shadow(gen)
    assert any(r["op"] == "U" and None in r["values"].values()
               for rows in changes.values() for r in rows)


def test_feature_txn_recorded_twice_latest_wins(gen):
    txn_rows, _ = load_shadow(gen)
    by_id: dict[str, list[dict]] = {}
    for r in txn_rows:
        by_id.setdefault(r["txn_id"], []).append(r)
    twice = {k: v for k, v in by_id.items() if len(v) > 1}
    assert len(twice) >= 2
    for rows in twice.values():
        assert len({r["end_ts"] for r in rows}) == len(rows)
        assert rows[-1]["end_ts"] == max(r["end_ts"] for r in rows)  # later record, later time


def test_feature_change_rows_before_their_txn_row(gen):
    txn_rows, changes = load_shadow(gen)
    first_file = {}
    for r in txn_rows:
        first_file.setdefault(r["txn_id"], r["_file"])
    assert any(chunk_num(first_file[r["txn_id"]]) > chunk_num(r["_file"])
               for rows in changes.values() for r in rows)


def test_feature_txn_spans_two_binlog_files(txns):
    spanning = [t for t in txns if t["begin"]["file"] != t["end"]["file"]]
    assert len(spanning) == 1
    t = spanning[0]
    files = [t["begin"]["file"]] + [ev["file"] for ev in t["rows"]] + [t["end"]["file"]]
    assert len(set(files)) == 2 and files == sorted(files)


def test_feature_unknown_session(txns, sessions):
    assert any(resolve_user(sessions, t["begin"]["thread_id"], t["begin"]["ts"])[0] == "unknown"
               for t in txns)


def test_order_42_changed_by_two_users_with_two_roles(gen, txns, sessions):
    who = []
    for t in txns:
        if t["end"]["type"] != "commit":
            continue
        if any(table in ("shop.orders", "shop.order_items") and k[0] == 42 for table, k in _touched(t)):
            who.append(resolve_user(sessions, t["begin"]["thread_id"], t["begin"]["ts"]))
    assert len({u for u, _ in who}) >= 2 and len({r for _, r in who}) >= 2
    assert (42,) in load_expected(gen, "shop")["shop.orders"]
    # the same in the shadow form
    txn_rows, changes = load_shadow(gen)
    ident = {r["txn_id"]: (r["db_user"], r["db_role"]) for r in txn_rows}
    pg_who = {ident[r["txn_id"]] for table in ("shop.orders", "shop.order_items")
              for r in changes[table] if r["key"]["order_id"] == 42}
    assert len({u for u, _ in pg_who}) >= 2 and len({r for _, r in pg_who}) >= 2
