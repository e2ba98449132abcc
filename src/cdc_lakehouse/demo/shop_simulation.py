"""The shop workload simulation: a seeded run of transactions on the shop database
(``shop_model``): when each runs, which session (thread, user) runs it, how it ends (commit,
rollback, DDL), the binlog server's clock and ids (GTID, XID, PostgreSQL txid). What each
transaction does is in ``shop_transactions``; no files are written here.
"""

from __future__ import annotations

import random

from cdc_lakehouse.contract.lines import iso_s, session

from .shop_model import (DDLS, DEFAULT_SEED, DEFAULT_TXNS, FIRST_GTID_SEQ, FIRST_PG_XID,
                         FIRST_XID, GTID_DOMAIN, INITIAL_SESSIONS, MIN_TXNS, SCHEDULER, SCHEDULER_PG,
                         SCHEDULER_THREAD, SEC, SERVER_ID, START_US, TABLE_ORDER, TXNS_PER_BINLOG_FILE,
                         USERS, Txn, Workload, resolve_user)
from .shop_transactions import RANDOM_KINDS, Builder, TransactionKinds


# Special transactions, placed in this order at about this share of the run (the first free
# places from there); a tuple of several names runs back to back.
SPECIALS: tuple[tuple[float, tuple[str, ...]], ...] = (
    (0.12, ("commit_query_gtid",)),
    (0.18, ("rollback_order",)),
    (0.22, ("same_sec_a", "same_sec_b")),
    (0.27, ("null_city",)),
    (0.30, ("dup_record",)),
    (0.35, ("ddl_phone",)),
    (0.40, ("edit_add_remove",)),
    (0.45, ("scheduler",)),
    (0.48, ("edit_replace_line",)),
    (0.50, ("renumber_customer",)),
    (0.55, ("ddl_index",)),
    (0.58, ("edit_renumber_lines",)),
    (0.62, ("step_a", "step_b")),
    (0.66, ("purge_update_delete",)),
    (0.70, ("commit_query_no_gtid",)),
    (0.74, ("rollback_customer",)),
    (0.76, ("dup_record",)),
    (0.82, ("ddl_products",)),
    (0.86, ("delete_customer",)),
)


class Simulator(TransactionKinds):
    """Runs ``n_txns`` transactions from ``seed``: a plan of special transactions at fixed
    places (``_plan``), random ones between them, sessions connecting and reconnecting."""

    def __init__(self, seed: int, n_txns: int):
        if n_txns < MIN_TXNS:
            raise ValueError(f"n_txns must be at least {MIN_TXNS}")
        self.seed = seed
        self.n = n_txns
        self.rng = random.Random(seed)
        self.tables: dict[str, dict[tuple, dict]] = {t: {} for t in TABLE_ORDER}
        self.has_phone = False
        self.now = START_US  # true time of the last commit
        self.offset = 0  # binlog server clock offset, seconds
        self.txns: list[Txn] = []
        self.sessions: list[dict] = []
        self.thread_of: dict[str, int] = {}
        self.free_threads: list[tuple[int, str, int]] = []  # (thread_id, last user, freed at)
        self.next_thread = 16
        self.next_ids = {"orders": 1, "customers": 1, "products": 1}
        self.gtid_seq = FIRST_GTID_SEQ
        self.xid = FIRST_XID
        self.pg_xid = FIRST_PG_XID
        self.followups: list[tuple[int, str]] = []
        self.pair_target: tuple[str, tuple] | None = None
        self._plan()
        for user, tid, before in INITIAL_SESSIONS:
            self._connect(user, START_US - before * SEC, tid)

    # ---- plan --------------------------------------------------------------------------
    def _plan(self) -> None:
        n = self.n
        sp: dict[int, str] = {0: "load_products", 1: "load_customers"}
        self.boundaries = list(range(TXNS_PER_BINLOG_FILE, n, TXNS_PER_BINLOG_FILE))
        self.span_index = self.boundaries[-1]
        sp[self.span_index] = "span_order"

        def put(target: int, *names: str) -> int:
            i = target
            while any(j in sp or j >= n for j in range(i, i + len(names))):
                i += 1
            for j, name in enumerate(names):
                sp[i + j] = name
            return i

        placed = {names: put(int(n * share), *names) for share, names in SPECIALS}
        step = placed[("step_a", "step_b")]
        self.special = sp
        self.step_b = step + 1
        self.quiet_lo = step - 12  # no (re)connects from here to the clock step
        self.force_reuse_after = n // 2

    # ---- sessions ----------------------------------------------------------------------
    def _connect(self, user: str, t_us: int, tid: int | None = None) -> None:
        if tid is None:
            candidates = [f for f in self.free_threads if f[1] != user and f[2] + 60 * SEC < t_us]
            force = self.force_reuse_after is not None and len(self.txns) >= self.force_reuse_after
            if candidates and (force or self.rng.random() < 0.5):
                chosen = candidates[0]
                self.free_threads.remove(chosen)
                tid = chosen[0]
                if force:
                    self.force_reuse_after = None
            else:
                tid = self.next_thread
                self.next_thread += 1 + self.rng.randint(0, 3)
        self.thread_of[user] = tid
        self.sessions.append(session(SERVER_ID, tid, iso_s(t_us // SEC + self.offset), user,
                                     USERS[user][0]))

    def _reconnect(self, user: str, begin_t: int) -> None:
        old = self.thread_of[user]
        self.free_threads.append((old, user, begin_t))
        self._connect(user, begin_t - 2 * SEC)

    # ---- helpers -----------------------------------------------------------------------
    def _gap(self, i: int) -> int:
        if self.quiet_lo <= i < self.step_b:
            return self.rng.randint(1 * SEC, 6 * SEC)
        if self.rng.random() < 0.12:
            return self.rng.randint(80_000, 900_000)
        return self.rng.randint(1 * SEC, 40 * SEC)

    def _next_gtid(self) -> str:
        self.gtid_seq += 1
        return f"{GTID_DOMAIN}-{SERVER_ID}-{self.gtid_seq}"

    # ---- run ---------------------------------------------------------------------------
    def run(self) -> Workload:
        for i in range(self.n):
            name = self.special.get(i)
            if name in DDLS:
                self._ddl(i, name)
                continue
            if name is None and self.followups and self.followups[0][0] <= i:
                name = self.followups.pop(0)[1]
            self._dml(i, name)
        return Workload(self.seed, self.n, self.txns, self.sessions, self.tables,
                        self.span_index, self.boundaries)

    def _ddl(self, i: int, name: str) -> None:
        table, query = DDLS[name]
        begin = self.now + self._gap(i)
        commit = begin + self.rng.randint(5_000, 90_000)
        txn = Txn(index=i, label=name, user="dave", role=USERS["dave"][0],
                  thread_id=self.thread_of["dave"], begin_t=commit, commit_t=commit,
                  outcome="ddl", clock_offset=self.offset, gtid=self._next_gtid(),
                  ddl_table=table, ddl_query=query, special=name)
        self.txns.append(txn)
        if name == "ddl_phone":
            self.has_phone = True
            self.tables["customers"] = {k: {**r, "phone": None} for k, r in self.tables["customers"].items()}
        self.now = commit

    def _dml(self, i: int, name: str | None) -> None:
        rng = self.rng
        if name == "step_b":
            self.offset -= 7  # NTP steps the binlog server's clock back
            begin = self.now + rng.randint(1_500_000, 2_500_000)
        elif name == "same_sec_a":
            begin = (self.now + self._gap(i)) // SEC * SEC + SEC + 20_000
        elif name == "same_sec_b":
            begin = self.now + rng.randint(5_000, 30_000)
        else:
            begin = self.now + self._gap(i)

        b = self._build(i, name, begin)
        user = b.user
        if user != SCHEDULER:
            connectable = i > 1 and not (self.quiet_lo <= i <= self.step_b) and name not in (
                "same_sec_a", "same_sec_b")
            if connectable and rng.random() < 0.07:
                self._reconnect(user, begin)

        rollback = name in ("rollback_order", "rollback_customer") or (
            name is None and not b.no_rollback and rng.random() < 0.04)
        end = b.t + rng.randint(200, 3_000)
        if user == SCHEDULER:
            role, tid, pg_identity = "unknown", SCHEDULER_THREAD, SCHEDULER_PG
            user = "unknown"
        else:
            role, client, app = USERS[user]
            tid, pg_identity = self.thread_of[user], (user, role, client, app)
        self.pg_xid += rng.randint(1, 3)
        txn = Txn(index=i, label=b.label, user=user, role=role, thread_id=tid, begin_t=begin,
                  commit_t=end, outcome="rollback" if rollback else "commit",
                  clock_offset=self.offset, ops=b.ops, special=name,
                  pg_txn_id=str(self.pg_xid), pg_identity=pg_identity,
                  dup_record=name == "dup_record")
        no_gtid = i in (0, 1) or name == "commit_query_no_gtid"
        txn.gtid = None if no_gtid else self._next_gtid()
        if not rollback:
            txn.commit_query = name in ("commit_query_gtid", "commit_query_no_gtid")
            if not txn.commit_query:
                self.xid += rng.randint(1, 4)
                txn.xid = self.xid
            self.tables = b.work
            if b.created_42:
                self.followups += [(i + 4, "o42_support"), (i + 10, "o42_admin"), (i + 17, "o42_ship")]
        self.txns.append(txn)
        self.now = end

    def _build(self, i: int, name: str | None, begin: int) -> Builder:
        fixed = {
            "load_products": self._k_load_products,
            "load_customers": self._k_load_customers,
            "span_order": self._k_place_order,
            "rollback_order": self._k_rollback_order,
            "same_sec_a": lambda b: self._k_pair(b, "alice", first=True),
            "same_sec_b": lambda b: self._k_pair(b, "bob", first=False),
            "step_a": lambda b: self._k_pair(b, "alice", first=True),
            "step_b": lambda b: self._k_pair(b, "bob", first=False),
            "null_city": lambda b: self._k_customer_update(b, force_null=True),
            "edit_add_remove": lambda b: self._k_edit(b, "add_remove"),
            "edit_replace_line": lambda b: self._k_edit(b, "replace"),
            "edit_renumber_lines": lambda b: self._k_edit(b, "renumber"),
            "scheduler": self._k_scheduler,
            "renumber_customer": self._k_renumber,
            "purge_update_delete": lambda b: self._k_purge(b, update_first=True),
            "rollback_customer": self._k_customer_update,
            "delete_customer": lambda b: self._k_delete_customer(b, "carol"),
            "o42_support": self._k_o42_support,
            "o42_admin": self._k_o42_admin,
            "o42_ship": self._k_o42_ship,
        }
        if name in fixed:
            for _ in range(20):
                b = Builder(self, begin)
                b.label = name
                if fixed[name](b):
                    return b
            raise RuntimeError(f"seed {self.seed}: cannot build special transaction {name} at {i}")
        kinds = [k for k, _ in RANDOM_KINDS]
        weights = [w for _, w in RANDOM_KINDS]
        for _ in range(50):
            kind = self.rng.choices(kinds, weights)[0]
            b = Builder(self, begin)
            b.label = kind
            if getattr(self, f"_k_{kind}")(b):
                return b
        raise RuntimeError(f"seed {self.seed}: no applicable transaction at {i}")


def generate(seed: int = DEFAULT_SEED, n_txns: int = DEFAULT_TXNS) -> Workload:
    """Run the simulator; the result is the logical workload (no files)."""
    w = Simulator(seed, n_txns).run()
    for t in w.txns:  # the sessions must attribute every transaction to whoever ran it
        begin = t.server_s(t.begin_t)
        if resolve_user(w.sessions, t.thread_id, begin) != (t.user, t.role):
            raise RuntimeError(f"seed {seed}: session rule misattributes transaction {t.index}")
    return w
