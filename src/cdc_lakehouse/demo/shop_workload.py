"""Deterministic "shop" source workload and its landing files (docs: shared/design/CONTRACT.md).

A seeded simulator of a small MariaDB-like ``shop`` database (customers, products, orders,
order_items) runs a few hundred transactions from several users and roles, then writes:

* the binlog capture form for source ``shop`` (CONTRACT §2.1 events, §2.2 sessions),
* the trigger/shadow capture form of the same logical workload for source ``shop_pg``
  (CONTRACT §2.3 transaction rows, §2.4 change rows),
* a complete snapshot of ``shop.products`` at the last binlog commit (§2.5),
* the expected final source state of every table, for both sources.

The data deliberately contains the awkward cases the pipeline must handle: multi-table
transactions, several operations on one row inside a transaction (every allowed cell of §3),
key-changing updates, deletes, rolled-back transactions, DDL (a column added mid-stream),
commits sharing one second, a clock step back, a COMMIT query without XID, transactions
without GTID, thread ids reused by other users, a transaction spanning two binlog files, a
shadow update setting a column to NULL, a transaction row recorded twice and a transaction row
landing in a later file than its change rows.

Everything is derived from the seed: no wall clock, byte-identical output for a given
``(seed, n_txns)``.

Usage::

    python -m cdc_lakehouse.demo.shop_workload --out fixtures [--seed 7] [--txns 300]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from cdc_lakehouse.contract.lines import (binlog_event, change_row_of, iso_s, iso_us, row_image, session,
                                         snapshot_manifest, transaction_row)

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

SCHEMA = "shop"
BINLOG_SOURCE = "shop"
SHADOW_SOURCE = "shop_pg"
SERVER_ID = 1
GTID_DOMAIN = 0
FIRST_GTID_SEQ = 100
FIRST_XID = 1000
FIRST_PG_XID = 7300
FILE_START_POS = 256  # after the format description / gtid list events, which are not emitted
TXNS_PER_BINLOG_FILE = 100
TXNS_PER_SHADOW_FILE = 100
MIN_TXNS = 200
DEFAULT_SEED = 7
DEFAULT_TXNS = 300

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=timezone.utc)
START_US = int((START - _EPOCH).total_seconds()) * 1_000_000
SEC = 1_000_000
CENT = Decimal("0.01")

KEYS: dict[str, tuple[str, ...]] = {
    "customers": ("customer_id",),
    "products": ("product_id",),
    "orders": ("order_id",),
    "order_items": ("order_id", "line_no"),
}
BASE_COLUMNS: dict[str, tuple[str, ...]] = {
    "customers": ("customer_id", "name", "email", "city", "tier"),
    "products": ("product_id", "sku", "name", "price", "stock"),
    "orders": ("order_id", "customer_id", "status", "total", "created_at"),
    "order_items": ("order_id", "line_no", "product_id", "qty", "price"),
}
TABLE_ORDER = ("customers", "products", "orders", "order_items")

PHONE_DDL = "ALTER TABLE shop.customers ADD COLUMN phone varchar(20)"
DDLS = {
    "ddl_phone": ("customers", PHONE_DDL),
    "ddl_index": ("orders", "CREATE INDEX idx_orders_status ON shop.orders (status)"),
    "ddl_products": ("products", "ALTER TABLE shop.products MODIFY COLUMN name varchar(200) NOT NULL"),
}

# user -> (role, client address, application); the same people work on both sources.
USERS: dict[str, tuple[str, str, str]] = {
    "alice": ("app_writer", "10.0.1.21", "shop-api"),
    "bob": ("app_writer", "10.0.1.22", "shop-api"),
    "carol": ("support", "10.0.2.15", "support-console"),
    "dave": ("admin", "10.0.3.5", "psql"),
    "etl": ("etl_batch", "10.0.4.9", "nightly-etl"),
}
# The MariaDB event scheduler runs jobs on its own thread, which never appears in sessions.
SCHEDULER = "event_scheduler"
SCHEDULER_THREAD = 5
SCHEDULER_PG = ("cron", None, None, "pg_cron")  # db_user, db_role, client, application
INITIAL_SESSIONS = (  # user, thread_id, seconds before START
    ("etl", 11, 300),
    ("alice", 12, 167),
    ("bob", 13, 118),
    ("carol", 14, 80),
    ("dave", 15, 29),
)

FIRST_NAMES = ["Anna", "Ben", "Chloé", "David", "Emma", "Felix", "Greta", "Hugo", "Ines", "Jonas",
               "Karin", "Lukas", "Marta", "Nils", "Olga", "Paul", "Rita", "Søren", "Tara", "Ugo",
               "Vera", "Willem", "Xenia", "Yusuf", "Zoë", "José", "Maria", "Omar", "Lena", "Tom"]
LAST_NAMES = ["Berg", "Costa", "Dubois", "Eriksen", "Fischer", "García", "Hansen", "Ivanova",
              "Jensen", "Kowalski", "Larsen", "Müller", "Novak", "Olsen", "Petrov", "Rossi",
              "Schmidt", "Tanaka", "Weber", "Young"]
CITIES = ["Berlin", "Lisbon", "Zürich", "Kraków", "Lyon", "Oslo", "São Paulo", "Vienna",
          "Madrid", "Dublin"]
TIERS = ["bronze", "silver", "gold", "platinum"]
PRODUCT_NAMES = ["Espresso Beans 1kg", "Filter Coffee 500g", "Green Tea 100g", "Ceramic Mug",
                 "Travel Mug", "French Press", "Pour-over Kettle", "Burr Grinder", "Milk Frother",
                 "Paper Filters x100", "Oat Milk 1l", "Dark Chocolate 70%", "Biscotti Box",
                 "Tea Infuser", "Cold Brew Jar", "Coffee Scale", "Descaler", "Tamper 58mm",
                 "Knock Box", "Gift Card", "Chai Spice 250g", "Matcha 50g", "Honey 400g",
                 "Sugar Sticks x50"]
NEXT_STATUS = {"new": "paid", "paid": "shipped", "shipped": "delivered"}

ORDER_42 = 42


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def _money(x: Decimal) -> Decimal:
    return x.quantize(CENT, rounding=ROUND_HALF_UP)


def dumps(obj) -> str:
    """Compact deterministic JSON; ``Decimal`` is written as a number with 2 decimals."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, Decimal):
        return format(_money(obj), "f")
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, str):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, dict):
        return "{" + ",".join(json.dumps(k) + ":" + dumps(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def key_of(table: str, row: dict) -> tuple:
    return tuple(row[c] for c in KEYS[table])


def _pg_row(row: dict | None) -> dict | None:
    """The shadow source (PostgreSQL) never got the binlog-only ``phone`` column."""
    if row is None:
        return None
    return {k: v for k, v in row.items() if k != "phone"}


# --------------------------------------------------------------------------------------------
# Logical model
# --------------------------------------------------------------------------------------------


@dataclass
class RowOp:
    table: str
    kind: str  # insert | update | delete
    before: dict | None
    after: dict | None
    t: int  # true time, epoch microseconds
    stmt: int  # statement number inside the transaction (one binlog row event per statement)


@dataclass
class Txn:
    index: int  # position in the binlog (log order)
    label: str  # what the transaction does
    user: str  # who ran it ("unknown" for the event scheduler: no session)
    role: str
    thread_id: int | None
    begin_t: int
    commit_t: int  # commit / rollback / ddl time, true clock
    outcome: str  # commit | rollback | ddl
    clock_offset: int  # seconds the binlog server clock is off the true clock
    ops: list[RowOp] = field(default_factory=list)
    gtid: str | None = None
    xid: int | None = None
    commit_query: bool = False
    ddl_table: str | None = None
    ddl_query: str | None = None
    pg_txn_id: str | None = None
    pg_identity: tuple = ()
    special: str | None = None
    dup_record: bool = False

    def server_s(self, t_us: int) -> int:
        return t_us // SEC + self.clock_offset


@dataclass
class Workload:
    seed: int
    n_txns: int
    txns: list[Txn]
    sessions: list[dict]
    final: dict[str, dict[tuple, dict]]  # binlog source final state (with phone)
    span_index: int
    boundaries: list[int]


class _Builder:
    """One transaction's work on a private copy of the tables."""

    def __init__(self, gen: "_Gen", t0: int):
        self.gen = gen
        self.rng = gen.rng
        self.work = {name: dict(rows) for name, rows in gen.tables.items()}
        self.ops: list[RowOp] = []
        self.t = t0
        self._stmt = 0
        self.user: str | None = None
        self.label = ""
        self.no_rollback = False
        self.created_42 = False

    def tick(self) -> int:
        self.t += self.rng.randint(300, 8000)
        return self.t

    def row(self, table: str, **values) -> dict:
        cols = self.gen.columns(table)
        if table == "customers" and "phone" in cols:
            values.setdefault("phone", None)
        assert set(values) == set(cols), (table, sorted(values), cols)
        return {c: values[c] for c in cols}

    def insert(self, table: str, rows: list[dict]) -> None:
        self._stmt += 1
        for r in rows:
            k = key_of(table, r)
            assert k not in self.work[table], (table, k)
            self.work[table][k] = r
            self.ops.append(RowOp(table, "insert", None, r, self.tick(), self._stmt))

    def update(self, table: str, changes: list[tuple[tuple, dict]]) -> None:
        self._stmt += 1
        for k, ch in changes:
            before = self.work[table][k]
            after = dict(before)
            after.update(ch)
            assert after != before, (table, k, ch)
            nk = key_of(table, after)
            if nk != k:
                assert nk not in self.work[table], (table, nk)
                del self.work[table][k]
            self.work[table][nk] = after
            self.ops.append(RowOp(table, "update", before, after, self.tick(), self._stmt))

    def delete(self, table: str, keys: list[tuple]) -> None:
        self._stmt += 1
        for k in keys:
            before = self.work[table].pop(k)
            self.ops.append(RowOp(table, "delete", before, None, self.tick(), self._stmt))

    def keys(self, table: str) -> list[tuple]:
        return sorted(self.work[table])

    def items_of(self, order_id: int) -> list[dict]:
        return [self.work["order_items"][k] for k in self.keys("order_items") if k[0] == order_id]

    def order_total(self, order_id: int) -> Decimal:
        return _money(sum((it["price"] * it["qty"] for it in self.items_of(order_id)), Decimal("0")))

    def set_total(self, order_id: int) -> None:
        total = self.order_total(order_id)
        if self.work["orders"][(order_id,)]["total"] != total:
            self.update("orders", [((order_id,), {"total": total})])


# --------------------------------------------------------------------------------------------
# The simulator
# --------------------------------------------------------------------------------------------


RANDOM_KINDS = (
    ("place_order", 30),
    ("advance", 20),
    ("edit", 8),
    ("cancel", 5),
    ("customer_update", 10),
    ("signup", 7),
    ("etl", 6),
    ("purge", 3),
    ("renumber", 1),
    ("delete_customer", 2),
)


class _Gen:
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

        put(int(n * 0.12), "commit_query_gtid")
        put(int(n * 0.18), "rollback_order")
        put(int(n * 0.22), "same_sec_a", "same_sec_b")
        put(int(n * 0.27), "null_city")
        put(int(n * 0.30), "dup_record")
        put(int(n * 0.35), "ddl_phone")
        put(int(n * 0.40), "edit_add_remove")
        put(int(n * 0.45), "scheduler")
        put(int(n * 0.48), "edit_replace_line")
        put(int(n * 0.50), "renumber_customer")
        put(int(n * 0.55), "ddl_index")
        put(int(n * 0.58), "edit_renumber_lines")
        step = put(int(n * 0.62), "step_a", "step_b")
        put(int(n * 0.66), "purge_update_delete")
        put(int(n * 0.70), "commit_query_no_gtid")
        put(int(n * 0.74), "rollback_customer")
        put(int(n * 0.76), "dup_record")
        put(int(n * 0.82), "ddl_products")
        put(int(n * 0.86), "delete_customer")
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
    def columns(self, table: str) -> tuple[str, ...]:
        cols = BASE_COLUMNS[table]
        if table == "customers" and self.has_phone:
            cols = cols + ("phone",)
        return cols

    def _gap(self, i: int) -> int:
        if self.quiet_lo <= i < self.step_b:
            return self.rng.randint(1 * SEC, 6 * SEC)
        if self.rng.random() < 0.12:
            return self.rng.randint(80_000, 900_000)
        return self.rng.randint(1 * SEC, 40 * SEC)

    def _next_gtid(self) -> str:
        self.gtid_seq += 1
        return f"{GTID_DOMAIN}-{SERVER_ID}-{self.gtid_seq}"

    def _email(self, name: str) -> str:
        first, last = name.lower().split(" ", 1)
        table = str.maketrans({"é": "e", "ø": "o", "ë": "e", "ü": "u", "í": "i", "á": "a"})
        return f"{first.translate(table)}.{last.translate(table)}{self.rng.randint(1, 99)}@example.com"

    def _phone(self) -> str:
        return f"+49-30-{self.rng.randint(1000000, 9999999)}"

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

    def _build(self, i: int, name: str | None, begin: int) -> _Builder:
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
                b = _Builder(self, begin)
                b.label = name
                if fixed[name](b):
                    return b
            raise RuntimeError(f"seed {self.seed}: cannot build special transaction {name} at {i}")
        kinds = [k for k, _ in RANDOM_KINDS]
        weights = [w for _, w in RANDOM_KINDS]
        for _ in range(50):
            kind = self.rng.choices(kinds, weights)[0]
            b = _Builder(self, begin)
            b.label = kind
            if getattr(self, f"_k_{kind}")(b):
                return b
        raise RuntimeError(f"seed {self.seed}: no applicable transaction at {i}")

    # ---- transaction kinds ---------------------------------------------------------------
    def _k_load_products(self, b: _Builder) -> bool:
        b.user = "etl"
        rows = []
        for n, pname in enumerate(PRODUCT_NAMES, 1):
            pid = self.next_ids["products"]
            self.next_ids["products"] += 1
            price = _money(Decimal(self.rng.randint(250, 9999)) / 100)
            rows.append(b.row("products", product_id=pid, sku=f"SKU-{1000 + pid}", name=pname,
                              price=price, stock=self.rng.randint(40, 200)))
        b.insert("products", rows[:12])
        b.insert("products", rows[12:])
        return True

    def _k_load_customers(self, b: _Builder) -> bool:
        b.user = "etl"
        rows = []
        for _ in range(30):
            cid = self.next_ids["customers"]
            self.next_ids["customers"] += 1
            name = f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"
            rows.append(b.row("customers", customer_id=cid, name=name, email=self._email(name),
                              city=self.rng.choice(CITIES), tier=self.rng.choice(TIERS[:3])))
        b.insert("customers", rows)
        return True

    def _k_place_order(self, b: _Builder, user: str | None = None) -> bool:
        rng = self.rng
        custs = b.keys("customers")
        prods = [k for k in b.keys("products") if b.work["products"][k]["stock"] >= 3]
        if not custs or len(prods) < 4:
            return False
        oid = self.next_ids["orders"]
        self.next_ids["orders"] += 1  # auto-increment values are consumed even on rollback
        if oid == ORDER_42:
            b.user, b.no_rollback, b.created_42 = "alice", True, True
        else:
            b.user = user or rng.choice(["alice", "bob"])
        cust = rng.choice(custs)[0]
        chosen = rng.sample(prods, rng.choice([1, 2, 2, 3, 3, 4]))
        items = []
        for line, pk in enumerate(chosen, 1):
            p = b.work["products"][pk]
            items.append(b.row("order_items", order_id=oid, line_no=line, product_id=pk[0],
                               qty=rng.randint(1, 3), price=p["price"]))
        total = _money(sum((it["price"] * it["qty"] for it in items), Decimal("0")))
        two_step = rng.random() < 0.25  # insert with total 0, set the total at the end
        b.insert("orders", [b.row("orders", order_id=oid, customer_id=cust, status="new",
                                  total=Decimal("0.00") if two_step else total,
                                  created_at=iso_s(b.t // SEC))])
        b.insert("order_items", items)
        for it in items:
            pk = (it["product_id"],)
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] - it["qty"]})])
        if two_step:
            b.update("orders", [((oid,), {"total": total})])
        return True

    def _k_rollback_order(self, b: _Builder) -> bool:
        if self.next_ids["orders"] == ORDER_42:  # order 42 must exist
            b.label = "customer_update"
            return self._k_customer_update(b)
        b.label = "place_order"
        return self._k_place_order(b)

    def _orders(self, b: _Builder, statuses: tuple[str, ...], min_items: int = 0) -> list[tuple]:
        out = []
        for k in b.keys("orders"):
            if k[0] == ORDER_42 or b.work["orders"][k]["status"] not in statuses:
                continue
            if min_items and len(b.items_of(k[0])) < min_items:
                continue
            out.append(k)
        return out

    def _k_advance(self, b: _Builder) -> bool:
        cands = self._orders(b, tuple(NEXT_STATUS))
        if not cands:
            return False
        k = self.rng.choice(cands)
        b.user = self.rng.choice(["alice", "bob"])
        steps = 2 if (self.rng.random() < 0.2 and b.work["orders"][k]["status"] != "shipped") else 1
        for _ in range(steps):  # e.g. paid then shipped in one transaction: UPDATE + UPDATE
            b.update("orders", [(k, {"status": NEXT_STATUS[b.work["orders"][k]["status"]]})])
        return True

    def _k_pair(self, b: _Builder, user: str, first: bool) -> bool:
        """Two consecutive transactions changing the same row (same second / clock step)."""
        b.user = user
        if first:
            cands = self._orders(b, ("new", "paid"))
            self.pair_target = ("orders", self.rng.choice(cands)) if cands else \
                ("customers", self.rng.choice(b.keys("customers")))
        table, k = self.pair_target
        if table == "orders":
            b.update("orders", [(k, {"status": NEXT_STATUS[b.work["orders"][k]["status"]]})])
        else:
            tier = b.work["customers"][k]["tier"]
            b.update("customers", [(k, {"tier": TIERS[(TIERS.index(tier) + 1) % len(TIERS)]})])
        return True

    def _k_edit(self, b: _Builder, variant: str | None = None) -> bool:
        rng = self.rng
        variant = variant or rng.choice(["qty", "qty", "add_remove", "replace", "renumber"])
        cands = self._orders(b, ("new",), min_items=2 if variant == "renumber" else 1)
        if not cands:
            return False
        oid = rng.choice(cands)[0]
        b.user = rng.choice(["alice", "bob"])
        items = b.items_of(oid)
        in_order = [it["product_id"] for it in items]
        stocked = [k for k in b.keys("products") if b.work["products"][k]["stock"] >= 3
                   and k[0] not in in_order]
        if variant == "qty":
            it = rng.choice(items)
            pk = (it["product_id"],)
            if b.work["products"][pk]["stock"] >= 1:
                dq = 1
            elif it["qty"] > 1:
                dq = -1
            else:
                return False
            b.update("order_items", [(key_of("order_items", it), {"qty": it["qty"] + dq})])
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] - dq})])
        elif variant == "add_remove":  # INSERT then DELETE of the same line: nothing
            if not stocked:
                return False
            p = b.work["products"][rng.choice(stocked)]
            line = max(it["line_no"] for it in items) + 1
            b.insert("order_items", [b.row("order_items", order_id=oid, line_no=line,
                                           product_id=p["product_id"], qty=1, price=p["price"])])
            b.delete("order_items", [(oid, line)])
            it = items[0]
            pk = (it["product_id"],)
            if b.work["products"][pk]["stock"] < 1:
                return False
            b.update("order_items", [(key_of("order_items", it), {"qty": it["qty"] + 1})])
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] - 1})])
        elif variant == "replace":  # DELETE then INSERT of the same line: UPDATE
            if not stocked:
                return False
            it = rng.choice(items)
            new_p = b.work["products"][rng.choice(stocked)]
            old_pk = (it["product_id"],)
            b.delete("order_items", [key_of("order_items", it)])
            b.insert("order_items", [b.row("order_items", order_id=oid, line_no=it["line_no"],
                                           product_id=new_p["product_id"], qty=it["qty"],
                                           price=new_p["price"])])
            b.update("products", [(old_pk, {"stock": b.work["products"][old_pk]["stock"] + it["qty"]})])
            new_pk = (new_p["product_id"],)
            b.update("products", [(new_pk, {"stock": b.work["products"][new_pk]["stock"] - it["qty"]})])
        elif variant == "renumber":  # drop line 1, renumber the others: key-changing updates
            first = items[0]
            b.delete("order_items", [key_of("order_items", first)])
            b.update("order_items", [((oid, it["line_no"]), {"line_no": it["line_no"] - 1})
                                     for it in items[1:]])
            pk = (first["product_id"],)
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] + first["qty"]})])
        b.set_total(oid)
        return True

    def _cancel_with_restock(self, b: _Builder, k: tuple) -> None:
        b.update("orders", [(k, {"status": "cancelled"})])
        for it in b.items_of(k[0]):
            pk = (it["product_id"],)
            if pk in b.work["products"]:
                b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] + it["qty"]})])

    def _k_cancel(self, b: _Builder) -> bool:
        cands = self._orders(b, ("new", "paid"))
        if not cands:
            return False
        b.user = self.rng.choice(["carol", "carol", "alice"])
        self._cancel_with_restock(b, self.rng.choice(cands))
        return True

    def _k_scheduler(self, b: _Builder) -> bool:
        """Event scheduler job: cancel stale new orders (runs on a thread with no session)."""
        cands = self._orders(b, ("new",))
        if not cands:
            return False
        b.user = SCHEDULER
        b.no_rollback = True
        for k in cands[:3]:
            self._cancel_with_restock(b, k)
        return True

    def _k_customer_update(self, b: _Builder, force_null: bool = False) -> bool:
        rng = self.rng
        custs = [k for k in b.keys("customers")
                 if not force_null or b.work["customers"][k]["city"] is not None]
        if not custs:
            return False
        k = rng.choice(custs)
        cur = b.work["customers"][k]
        b.user = "carol"
        changes: dict = {}
        if force_null:
            changes["city"] = None  # explicit NULL
            changes["tier"] = TIERS[(TIERS.index(cur["tier"]) + 1) % len(TIERS)] \
                if cur["tier"] in TIERS else "bronze"
        else:
            for col in rng.sample(["email", "city", "tier"], rng.choice([1, 1, 2])):
                if col == "email":
                    changes["email"] = self._email(cur["name"])
                    if self.has_phone and rng.random() < 0.5:
                        changes["phone"] = self._phone()
                elif col == "city":
                    changes["city"] = None if rng.random() < 0.2 else rng.choice(CITIES)
                else:
                    changes["tier"] = rng.choice(TIERS)
        changes = {c: v for c, v in changes.items() if cur.get(c) != v}
        if not [c for c in changes if c != "phone"]:  # the shadow source has no phone column
            return False
        b.update("customers", [(k, changes)])
        return True

    def _k_signup(self, b: _Builder) -> bool:
        rng = self.rng
        b.user = rng.choice(["alice", "bob"])
        cid = self.next_ids["customers"]
        self.next_ids["customers"] += 1
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        values = dict(customer_id=cid, name=name, email=self._email(name),
                      city=rng.choice(CITIES + [None]), tier="bronze")
        if self.has_phone:
            values["phone"] = self._phone() if rng.random() < 0.6 else None
        b.insert("customers", [b.row("customers", **values)])
        r = rng.random()
        if r < 0.3:  # INSERT then UPDATE
            b.update("customers", [((cid,), {"tier": "silver"})])
        elif r < 0.4:  # INSERT then DELETE (duplicate sign-up removed at once)
            b.delete("customers", [(cid,)])
        return True

    def _k_etl(self, b: _Builder) -> bool:
        rng = self.rng
        b.user = "etl"
        prods = b.keys("products")
        changes = []
        for pk in sorted(rng.sample(prods, min(len(prods), rng.randint(2, 5)))):
            price = b.work["products"][pk]["price"]
            new = _money(price * Decimal(rng.choice([90, 95, 105, 110, 115])) / 100)
            if new != price:
                changes.append((pk, {"price": new}))
        if changes:
            b.update("products", changes)  # one statement, one multi-row event
        low = [pk for pk in prods if b.work["products"][pk]["stock"] < 60]
        if low and rng.random() < 0.6:
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] + 100}) for pk in low])
        if rng.random() < 0.25:
            pid = self.next_ids["products"]
            self.next_ids["products"] += 1
            b.insert("products", [b.row("products", product_id=pid, sku=f"SKU-{1000 + pid}",
                                        name=f"Seasonal Blend #{pid}",
                                        price=_money(Decimal(rng.randint(500, 3000)) / 100),
                                        stock=rng.randint(20, 80))])
            if rng.random() < 0.5:  # INSERT then UPDATE
                b.update("products", [((pid,), {"price": Decimal("9.99")})])
        if rng.random() < 0.15:
            used = {it["product_id"] for it in b.work["order_items"].values()}
            unused = [pk for pk in b.keys("products") if pk[0] not in used]
            if unused:
                b.delete("products", [rng.choice(unused)])
        return bool(b.ops)

    def _k_purge(self, b: _Builder, update_first: bool | None = None) -> bool:
        cands = self._orders(b, ("cancelled",)) or (self._orders(b, ("delivered",)) if update_first else [])
        if not cands:
            return False
        b.user = "dave"
        k = self.rng.choice(cands)
        if update_first is None:
            update_first = self.rng.random() < 0.5
        if update_first:  # UPDATE then DELETE
            b.update("orders", [(k, {"status": "archived"})])
        items = [key_of("order_items", it) for it in b.items_of(k[0])]
        if items:
            b.delete("order_items", items)
        b.delete("orders", [k])
        return True

    def _k_renumber(self, b: _Builder) -> bool:
        """Admin moves a customer into the 1000+ id range: key-changing update + its orders."""
        with_orders = sorted({r["customer_id"] for r in b.work["orders"].values()})
        cands = [c for c in with_orders if c < 1000 and (c + 1000,) not in b.work["customers"]
                 and (c,) in b.work["customers"]]
        if not cands:
            return False
        b.user = "dave"
        cid = self.rng.choice(cands)
        b.update("customers", [((cid,), {"customer_id": cid + 1000})])
        b.update("orders", [(k, {"customer_id": cid + 1000}) for k in b.keys("orders")
                            if b.work["orders"][k]["customer_id"] == cid])
        return True

    def _k_delete_customer(self, b: _Builder, user: str | None = None) -> bool:
        with_orders = {r["customer_id"] for r in b.work["orders"].values()}
        cands = [k for k in b.keys("customers") if k[0] not in with_orders]
        if not cands:
            return False
        b.user = user or self.rng.choice(["carol", "dave"])
        k = self.rng.choice(cands)
        if b.user == "carol":  # UPDATE then DELETE
            b.update("customers", [(k, {"tier": "closed"})])
        b.delete("customers", [k])
        return True

    def _k_o42_support(self, b: _Builder) -> bool:
        b.user = "carol"
        k = (ORDER_42,)
        b.update("orders", [(k, {"status": "on_hold"})])
        ck = (b.work["orders"][k]["customer_id"],)
        tier = b.work["customers"][ck]["tier"]
        b.update("customers", [(ck, {"tier": "platinum" if tier != "platinum" else "gold"})])
        return True

    def _k_o42_admin(self, b: _Builder) -> bool:
        b.user = "dave"
        first = b.items_of(ORDER_42)[0]
        b.update("order_items", [(key_of("order_items", first),
                                  {"price": _money(first["price"] * Decimal("0.9"))})])
        b.update("orders", [((ORDER_42,), {"status": "paid", "total": b.order_total(ORDER_42)})])
        return True

    def _k_o42_ship(self, b: _Builder) -> bool:
        b.user = "bob"
        b.update("orders", [((ORDER_42,), {"status": "shipped"})])
        return True


def generate(seed: int = DEFAULT_SEED, n_txns: int = DEFAULT_TXNS) -> Workload:
    """Run the simulator; the result is the logical workload (no files)."""
    w = _Gen(seed, n_txns).run()
    for t in w.txns:  # the sessions must attribute every transaction to whoever ran it
        begin = t.server_s(t.begin_t)
        if resolve_user(w.sessions, t.thread_id, begin) != (t.user, t.role):
            raise RuntimeError(f"seed {seed}: session rule misattributes transaction {t.index}")
    return w


# --------------------------------------------------------------------------------------------
# Rendering: binlog form
# --------------------------------------------------------------------------------------------


def _event(ts: int, gtid: str | None, etype: str, **fields) -> dict:
    """An event without its place: file and pos are set when the log is cut into files."""
    return binlog_event(SERVER_ID, None, None, ts, gtid, etype, **fields)


def _event_size(ev: dict) -> int:
    """A plausible, deterministic on-disk size of the event (for positions)."""
    t = ev["type"]
    if t == "begin":
        return 42 + 73
    if t == "commit":
        return 31 if ev["xid"] is not None else 77
    if t == "rollback":
        return 79
    if t == "ddl":
        return 42 + 60 + len(ev["query"].encode())
    return 19 + 40 + len(dumps(ev["rows"]).encode()) // 2


def _binlog_txn_events(txn: Txn) -> list[dict]:
    if txn.outcome == "ddl":
        return [_event(txn.server_s(txn.commit_t), txn.gtid, "ddl", thread_id=txn.thread_id,
                       schema=SCHEMA, table=txn.ddl_table, query=txn.ddl_query)]
    evs = [_event(txn.server_s(txn.begin_t), txn.gtid, "begin", thread_id=txn.thread_id)]
    groups: list[list[RowOp]] = []
    for op in txn.ops:
        if groups and groups[-1][0].stmt == op.stmt:
            groups[-1].append(op)
        else:
            groups.append([op])
    for g in groups:
        first = g[0]
        rows = [row_image(op.before, op.after) for op in g]
        evs.append(_event(txn.server_s(first.t), txn.gtid, first.kind, schema=SCHEMA,
                          table=first.table, primary_key=list(KEYS[first.table]), rows=rows))
    end_ts = txn.server_s(txn.commit_t)
    if txn.outcome == "rollback":
        evs.append(_event(end_ts, txn.gtid, "rollback"))
    else:
        evs.append(_event(end_ts, txn.gtid, "commit", xid=txn.xid))
    return evs


def binlog_file_name(n: int) -> str:
    return f"mysql-bin.{n:06d}"


def render_binlog(w: Workload) -> dict[str, list[dict]]:
    """Binlog events per binlog file name, in log order, with file and pos filled in."""
    files: dict[str, list[dict]] = {}
    cur, pos = 1, FILE_START_POS
    for txn in w.txns:
        evs = _binlog_txn_events(txn)
        rotate_at = None
        if txn.index in w.boundaries:
            rotate_at = 0
            if txn.index == w.span_index:  # begin and the first row event stay in the old file
                rotate_at = 2
                assert len(evs) > 3, "the spanning transaction needs several row events"
        for j, ev in enumerate(evs):
            if j == rotate_at:
                cur, pos = cur + 1, FILE_START_POS
            ev["file"] = binlog_file_name(cur)
            ev["pos"] = pos
            pos += _event_size(ev)
            files.setdefault(ev["file"], []).append(ev)
    return files


# --------------------------------------------------------------------------------------------
# Rendering: shadow form
# --------------------------------------------------------------------------------------------


def _shadow_change_rows(txn: Txn) -> list[tuple[str, dict]]:
    out = []
    for seq, op in enumerate(txn.ops, 1):
        row = change_row_of(txn.pg_txn_id, iso_us(op.t), seq, KEYS[op.table], _pg_row(op.before),
                            _pg_row(op.after))
        assert row["op"] != "U" or row["values"], (txn.index, op)  # phone-only updates are skipped
        out.append((op.table, row))
    return out


def _txn_row(txn: Txn, end_t: int) -> dict:
    db_user, db_role, client, app = txn.pg_identity
    return transaction_row(txn.pg_txn_id, iso_us(end_t), db_user, db_role, client, app)


def render_shadow(w: Workload) -> tuple[dict[int, list[dict]], dict[tuple[str, int], list[dict]]]:
    """(transaction rows per file number, change rows per (table, file number)).

    Committed transactions are cut into files of ``TXNS_PER_SHADOW_FILE`` in commit order.
    Two twists: the transaction row of the last transaction of file 1 is only in file 2 (its
    change rows must wait for it), and the ``dup_record`` transactions are first recorded with
    the time of their last operation, then again with their commit time in the next file (or
    at the end of the same file when it is the last one).
    """
    committed = [t for t in w.txns if t.outcome == "commit"]
    n_files = (len(committed) + TXNS_PER_SHADOW_FILE - 1) // TXNS_PER_SHADOW_FILE
    head: dict[int, list[dict]] = {c: [] for c in range(1, n_files + 1)}
    body: dict[int, list[dict]] = {c: [] for c in range(1, n_files + 1)}
    tail: dict[int, list[dict]] = {c: [] for c in range(1, n_files + 1)}
    changes: dict[tuple[str, int], list[dict]] = {}
    held_idx = TXNS_PER_SHADOW_FILE - 1 if n_files > 1 else None
    for idx, txn in enumerate(committed):
        chunk = idx // TXNS_PER_SHADOW_FILE + 1
        for table, row in _shadow_change_rows(txn):
            changes.setdefault((table, chunk), []).append(row)
        if idx == held_idx:
            head[chunk + 1].append(_txn_row(txn, txn.commit_t))
        elif txn.dup_record:
            body[chunk].append(_txn_row(txn, txn.ops[-1].t))
            tail[min(chunk + 1, n_files)].append(_txn_row(txn, txn.commit_t))
        else:
            body[chunk].append(_txn_row(txn, txn.commit_t))
    txn_files = {c: head[c] + body[c] + tail[c] for c in range(1, n_files + 1)}
    return txn_files, changes


# --------------------------------------------------------------------------------------------
# Rendering: everything as files
# --------------------------------------------------------------------------------------------


def _jsonl(rows) -> bytes:
    return "".join(dumps(r) + "\n" for r in rows).encode("utf-8")


def _sorted_rows(rows: dict[tuple, dict]) -> list[dict]:
    return [rows[k] for k in sorted(rows)]


def render_files(seed: int = DEFAULT_SEED, n_txns: int = DEFAULT_TXNS) -> dict[str, bytes]:
    """All output files as {relative path: content}."""
    w = generate(seed, n_txns)
    out: dict[str, bytes] = {}
    lb = f"landing/{BINLOG_SOURCE}"
    ls = f"landing/{SHADOW_SOURCE}/shadow"

    binlog = render_binlog(w)
    for fname, evs in binlog.items():
        out[f"{lb}/binlog/{fname}.jsonl"] = _jsonl(evs)
    out[f"{lb}/sessions/sessions-0001.jsonl"] = _jsonl(w.sessions)

    txn_files, changes = render_shadow(w)
    for c, rows in txn_files.items():
        out[f"{ls}/_transactions/txns-{c:04d}.jsonl"] = _jsonl(rows)
    for (table, c), rows in sorted(changes.items()):
        out[f"{ls}/{SCHEMA}.{table}/changes-{c:04d}.jsonl"] = _jsonl(rows)

    last_commit = [ev for evs in binlog.values() for ev in evs if ev["type"] == "commit"][-1]
    products = _sorted_rows(w.final["products"])
    snap = f"{lb}/snapshot/{SCHEMA}.products/snap-0001"
    out[f"{snap}/part-00000.jsonl"] = _jsonl(products)
    manifest = snapshot_manifest("snap-0001", f"{SCHEMA}.products", list(KEYS["products"]),
                                 iso_s(w.txns[-1].server_s(w.txns[-1].commit_t) + 300),
                                 {"file": last_commit["file"], "pos": last_commit["pos"]},
                                 len(products))
    out[f"{snap}/_manifest.json"] = (dumps(manifest) + "\n").encode("utf-8")

    for table in TABLE_ORDER:
        rows = _sorted_rows(w.final[table])
        out[f"expected/{BINLOG_SOURCE}/{SCHEMA}.{table}.jsonl"] = _jsonl(rows)
        out[f"expected/{SHADOW_SOURCE}/{SCHEMA}.{table}.jsonl"] = _jsonl(_pg_row(r) for r in rows)
    return out


_OWNED_DIRS = (
    f"landing/{BINLOG_SOURCE}/binlog",
    f"landing/{BINLOG_SOURCE}/sessions",
    f"landing/{BINLOG_SOURCE}/snapshot/{SCHEMA}.products/snap-0001",
    f"landing/{SHADOW_SOURCE}/shadow/_transactions",
    *(f"landing/{SHADOW_SOURCE}/shadow/{SCHEMA}.{t}" for t in TABLE_ORDER),
    f"expected/{BINLOG_SOURCE}",
    f"expected/{SHADOW_SOURCE}",
)
_OWNED_NAME = re.compile(r"^(mysql-bin\.\d+|sessions-\d+|txns-\d+|changes-\d+|part-\d+|"
                         r"shop\.\w+)\.jsonl$|^_manifest\.json$")


def write_landing(out_dir, seed: int = DEFAULT_SEED, n_txns: int = DEFAULT_TXNS) -> list[Path]:
    """Write landing files and expected state under ``out_dir``; returns the written paths.

    Stale generated files (e.g. from a run with more transactions) are removed from the
    directories this generator owns; nothing else is touched.
    """
    root = Path(out_dir)
    files = render_files(seed, n_txns)
    for d in _OWNED_DIRS:
        p = root / d
        if p.is_dir():
            for f in sorted(p.iterdir()):
                rel = f"{d}/{f.name}"
                if f.is_file() and _OWNED_NAME.match(f.name) and rel not in files:
                    f.unlink()
    written = []
    for rel, data in sorted(files.items()):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists() or p.read_bytes() != data:
            p.write_bytes(data)
        written.append(p)
    return written


# --------------------------------------------------------------------------------------------
# Summary (what is in the data)
# --------------------------------------------------------------------------------------------


def _combine_cells(w: Workload) -> dict[str, int]:
    """Count, over committed transactions, the §3 cells hit by consecutive ops on one key."""
    cells: dict[str, int] = {}
    for txn in w.txns:
        if txn.outcome != "commit":
            continue
        seqs: dict[tuple, list[str]] = {}
        for op in txn.ops:
            if op.kind == "update":
                ko, kn = key_of(op.table, op.before), key_of(op.table, op.after)
                if ko != kn:
                    seqs.setdefault((op.table, ko), []).append("D")
                    seqs.setdefault((op.table, kn), []).append("I")
                    continue
                seqs.setdefault((op.table, kn), []).append("U")
            elif op.kind == "insert":
                seqs.setdefault((op.table, key_of(op.table, op.after)), []).append("I")
            else:
                seqs.setdefault((op.table, key_of(op.table, op.before)), []).append("D")
        for s in seqs.values():
            for a, b in zip(s, s[1:]):
                cells[a + b] = cells.get(a + b, 0) + 1
    return cells


def resolve_user(sessions: list[dict], thread_id, begin_ts: int) -> tuple[str, str]:
    """CONTRACT §2.2: the session on thread_id that connected most recently before begin."""
    best = None
    for s in sessions:
        if s["thread_id"] != thread_id:
            continue
        t = int((datetime.strptime(s["connected_at"], "%Y-%m-%dT%H:%M:%SZ")
                 .replace(tzinfo=timezone.utc) - _EPOCH).total_seconds())
        if t < begin_ts and (best is None or t >= best[0]):
            best = (t, s["user"], s["role"])
    return (best[1], best[2]) if best else ("unknown", "unknown")


def summarize(seed: int = DEFAULT_SEED, n_txns: int = DEFAULT_TXNS) -> dict:
    w = generate(seed, n_txns)
    binlog = render_binlog(w)
    events = [ev for evs in binlog.values() for ev in evs]
    ends = [ev for ev in events if ev["type"] in ("commit", "ddl")]
    commits = [t for t in w.txns if t.outcome == "commit"]
    txn_files, changes = render_shadow(w)
    txn_rows = [r for rows in txn_files.values() for r in rows]
    change_rows = [r for rows in changes.values() for r in rows]
    ids = [r["txn_id"] for r in txn_rows]
    o42 = []
    for t in w.txns:
        if t.outcome == "commit" and any(op.table in ("orders", "order_items") and
                                         (op.before or op.after)["order_id"] == ORDER_42
                                         for op in t.ops):
            o42.append({"index": t.index, "label": t.label, "user": t.user, "role": t.role,
                        "gtid": t.gtid, "xid": t.xid, "pg_txn_id": t.pg_txn_id})
    return {
        "transactions": len(w.txns),
        "committed_dml": len(commits),
        "rolled_back": sum(t.outcome == "rollback" for t in w.txns),
        "ddl": sum(t.outcome == "ddl" for t in w.txns),
        "binlog_files": sorted(binlog),
        "binlog_events": len(events),
        "commit_without_xid": sum(ev["type"] == "commit" and ev["xid"] is None for ev in events),
        "txns_without_gtid": sum(t.gtid is None for t in w.txns),
        "same_second_commit_pairs": sum(a["ts"] == b["ts"] for a, b in zip(ends, ends[1:])),
        "clock_steps_back": sum(b["ts"] < a["ts"] for a, b in zip(ends, ends[1:])),
        "multi_table_txns": sum(len({op.table for op in t.ops}) > 1 for t in commits),
        "multi_row_events": sum(ev["rows"] is not None and len(ev["rows"]) > 1 for ev in events),
        "key_changing_updates": sum(op.kind == "update" and key_of(op.table, op.before) !=
                                    key_of(op.table, op.after) for t in commits for op in t.ops),
        "deletes": sum(op.kind == "delete" for t in commits for op in t.ops),
        "same_row_cells": dict(sorted(_combine_cells(w).items())),
        "shadow_updates_with_null": sum(r["op"] == "U" and None in r["values"].values()
                                        for r in change_rows),
        "shadow_change_rows": len(change_rows),
        "shadow_txn_rows": len(txn_rows),
        "shadow_txns_recorded_twice": len(ids) - len(set(ids)),
        "sessions": len(w.sessions),
        "threads_reused_by_other_user": sum(
            len({s["user"] for s in w.sessions if s["thread_id"] == tid}) > 1
            for tid in sorted({s["thread_id"] for s in w.sessions})),
        "unknown_user_txns": sum(t.user == "unknown" for t in w.txns),
        "order_42": o42,
        "final_rows": {t: len(w.final[t]) for t in TABLE_ORDER},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cdc_lakehouse.demo.shop_workload",
                                 description="Write the shop demo workload as landing files.")
    ap.add_argument("--out", required=True, help="output directory (gets landing/ and expected/)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--txns", type=int, default=DEFAULT_TXNS,
                    help=f"number of source transactions (>= {MIN_TXNS})")
    ap.add_argument("--summary", action="store_true", help="print what is in the data as JSON")
    args = ap.parse_args(argv)
    if args.txns < MIN_TXNS:
        ap.error(f"--txns must be at least {MIN_TXNS}")
    paths = write_landing(args.out, seed=args.seed, n_txns=args.txns)
    print(f"wrote {len(paths)} files under {args.out}")
    if args.summary:
        print(json.dumps(summarize(args.seed, args.txns), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
