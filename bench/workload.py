"""A scalable, seeded generator of realistic CDC landing data (CONTRACT §2), any size.

One logical workload of an ``app`` database is simulated transaction by transaction and written,
streaming, with the standard library only, in the two capture forms:

* ``binlog`` (source ``bench``): BEGIN / row events / COMMIT (XID, or a COMMIT query), GTIDs,
  sessions with users and roles; files rotated at transaction boundaries, except that a
  transaction bigger than a file is split across files;
* ``shadow`` (source ``bench_pg``): a transaction table plus one change-row folder per table,
  updates carrying only their changed columns.

and the committed source state at the end (``expected/<source>/<schema>.<table>.jsonl``) and an
onboarding file for both sources (``onboarding.yml``).

What makes it realistic (and awkward):

* tables of different widths: ``accounts`` (7 columns, SCD2 with tracked columns), ``orders``
  (12, SCD2), ``order_lines`` (6, composite key), ``devices`` (40, wide telemetry rows);
* skewed keys: hot accounts and devices (a power law), recent orders far more often than old ones;
* multi-table transactions (an order with its lines and the account's balance), multi-row
  statements (telemetry updates of many devices in one row event);
* very large transactions: the initial loads and bulk updates of tens of thousands of rows
  (``big_txn_rows``);
* several operations on one row in one transaction (insert+update, update+delete,
  delete+insert, insert+delete), deletes, key-changing updates (renumbered lines, moved
  accounts), explicit NULLs, rolled-back transactions, commits sharing one second, a clock step
  back, COMMIT queries without XID, transactions without GTID, and optionally one transaction
  left open at the end (held, not applied).

The size is the number of binlog **row changes** (row images of insert/update/delete events,
rolled-back and open work included); a row event may carry several. Everything follows from
``(seed, row_changes, options)``: no wall clock, byte-identical output.

Usage: ``python -m bench generate --out DIR --row-changes 1000000``.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import yaml

from cdc_lakehouse.contract.landing import binlog_dir, numbered_file, sessions_dir, shadow_table_dir, transactions_dir
from cdc_lakehouse.contract.lines import (binlog_event, binlog_file_name, change_row_of, iso_s, iso_us, row_image, session,
                                         transaction_row)
from cdc_lakehouse.contract.publication import write_file
from cdc_lakehouse.contract.writer import FileSeries, LandingFile

SCHEMA = "app"
BINLOG_SOURCE = "bench"
SHADOW_SOURCE = "bench_pg"
FILE_START_POS = 256  # after the format description / GTID list events, which are not written
SERVER_ID = 7
START_S = int(datetime(2026, 3, 2, 9, 0, 0, tzinfo=timezone.utc).timestamp())

# user -> (role, thread id); the event scheduler has no session (user "unknown").
USERS = {
    "api": ("app_writer", 21),
    "api2": ("app_writer", 22),
    "support": ("support", 23),
    "etl": ("etl_batch", 24),
    "admin": ("admin", 25),
}
SCHEDULER_THREAD = 5

DEVICE_METRICS = tuple(f"m{i:02d}" for i in range(1, 33))


@dataclass(frozen=True)
class TableSpec:
    name: str
    keys: tuple[str, ...]
    columns: tuple[str, ...]  # every column, keys included, in table order
    scd_type: int = 1
    track_history: tuple[str, ...] | None = None

    @property
    def qualified(self) -> str:
        return f"{SCHEMA}.{self.name}"


TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        TableSpec("accounts", ("account_id",),
                  ("account_id", "name", "email", "tier", "balance", "city", "updated_at"),
                  scd_type=2, track_history=("tier", "city")),
        TableSpec("orders", ("order_id",),
                  ("order_id", "account_id", "status", "total", "currency", "channel", "created_at",
                   "updated_at", "items", "discount", "tax", "note"),
                  scd_type=2),
        TableSpec("order_lines", ("order_id", "line_no"),
                  ("order_id", "line_no", "sku", "qty", "price", "updated_at")),
        TableSpec("devices", ("device_id",),
                  ("device_id", "model", "firmware", "site", "status", "last_seen", "owner_id",
                   *DEVICE_METRICS, "note")),
    )
}

CITIES = ["Berlin", "Lisbon", "Zürich", "Kraków", "Lyon", "Oslo", "São Paulo", "Vienna", "Madrid", "Dublin"]
TIERS = ["bronze", "silver", "gold", "platinum"]
STATUSES = ["new", "paid", "shipped", "delivered"]
CHANNELS = ["web", "app", "store", "phone"]
MODELS = ["TX-100", "TX-200", "RX-9", "Q-Edge", "Q-Core"]
SITES = [f"site-{i:02d}" for i in range(1, 41)]

FORMS = ("binlog", "shadow")  # the two capture forms written (module docstring)

# transaction kind -> weight (per transaction)
MIX = (
    ("new_order", 24),
    ("order_status", 20),
    ("telemetry", 22),
    ("account_update", 10),
    ("signup", 6),
    ("cancel_order", 5),
    ("edit_order", 7),
    ("device_churn", 3),
    ("move_account", 1),
    ("scheduler", 2),
)
# transaction kind -> the user who runs it (the others: "api" or "api2", at random)
USER_OF_KIND = {"cancel_order": "support", "account_update": "support", "move_account": "admin",
                "scheduler": "scheduler", "device_churn": "etl"}


@dataclass
class WorkloadOptions:
    row_changes: int = 1_000_000
    seed: int = 42
    forms: tuple[str, ...] = FORMS
    tables: tuple[str, ...] = tuple(TABLES)  # onboarded / generated tables
    accounts: int | None = None  # initial population; default scales with row_changes
    devices: int | None = None
    big_txn_rows: int | None = None  # rows of each very large transaction
    rollback_rate: float = 0.02
    open_tail: bool = True  # leave the last transaction open (held)
    events_per_file: int = 50_000  # binlog lines per file (rotation at a transaction boundary)
    split_transactions: bool = False  # rotate exactly every events_per_file lines, mid-transaction too
    txns_per_shadow_file: int = 5_000

    def resolved(self) -> "WorkloadOptions":
        n = self.row_changes
        o = WorkloadOptions(**asdict(self))
        o.forms, o.tables = tuple(self.forms), tuple(self.tables)
        unknown = set(o.tables) - set(TABLES)
        if unknown:
            raise ValueError(f"unknown tables {sorted(unknown)}; known: {sorted(TABLES)}")
        o.accounts = self.accounts if self.accounts is not None else max(5, min(200_000, n // 40))
        o.devices = self.devices if self.devices is not None else max(5, min(100_000, n // 60))
        o.big_txn_rows = self.big_txn_rows if self.big_txn_rows is not None else max(10, min(50_000, n // 25))
        return o


@dataclass
class WorkloadSummary:
    options: dict
    transactions: int = 0
    committed: int = 0
    rolled_back: int = 0
    open: int = 0
    row_changes: int = 0  # row images in binlog row events (all outcomes)
    committed_row_changes: int = 0
    binlog_lines: int = 0
    binlog_files: int = 0
    binlog_bytes: int = 0
    shadow_change_rows: int = 0
    shadow_txn_rows: int = 0
    largest_txn_rows: int = 0
    multi_table_txns: int = 0
    key_changes: int = 0
    deletes: int = 0
    final_rows: dict = field(default_factory=dict)
    by_table: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


# ------------------------------------------------------------------------------------------
# Source state with an undo log (rolled-back work is undone) and O(1) random key choice
# ------------------------------------------------------------------------------------------
class Table:
    def __init__(self, spec: TableSpec):
        self.spec = spec
        self.rows: dict[tuple, dict] = {}
        self.keys: list[tuple] = []
        self.index: dict[tuple, int] = {}

    def key_of(self, row: dict) -> tuple:
        return tuple(row[k] for k in self.spec.keys)

    def _put(self, key, row):
        if key not in self.rows:
            self.index[key] = len(self.keys)
            self.keys.append(key)
        self.rows[key] = row

    def _remove(self, key):
        del self.rows[key]
        i = self.index.pop(key)
        last = self.keys.pop()
        if i < len(self.keys):
            self.keys[i] = last
            self.index[last] = i

    def pick(self, rng: random.Random, skew: float = 1.0):
        """A key; ``skew`` > 1 favours the hot (low-index) keys with a power law."""
        if not self.keys:
            return None
        return self.keys[int(len(self.keys) * rng.random() ** skew)]


@dataclass
class Op:
    table: str
    kind: str  # insert | update | delete
    before: dict | None
    after: dict | None
    stmt: int
    t_us: int


class Txn:
    """One source transaction's work, applied to the state as it goes, undone on rollback."""

    def __init__(self, db: "Source", user: str, t_us: int):
        self.db, self.user, self.t_us = db, user, t_us  # t_us: true time of the last operation
        self.ops: list[Op] = []
        self.undo: list[tuple] = []
        self.stmt = 0

    def _tick(self) -> int:
        self.t_us += self.db.rng.randint(50, 2000)
        return self.t_us

    def statement(self) -> int:
        self.stmt += 1
        return self.stmt

    def insert(self, table: str, row: dict, stmt: int | None = None) -> None:
        t = self.db.tables[table]
        key = t.key_of(row)
        assert key not in t.rows, (table, key)
        t._put(key, row)
        self.undo.append((table, key, None))
        self.ops.append(Op(table, "insert", None, row, stmt or self.statement(), self._tick()))

    def update(self, table: str, key: tuple, changes: dict, stmt: int | None = None) -> bool:
        t = self.db.tables[table]
        before = t.rows[key]
        after = {**before, **changes}
        if after == before:
            return False
        new_key = t.key_of(after)
        if new_key != key:
            assert new_key not in t.rows, (table, new_key)
            t._remove(key)
            self.undo.append((table, new_key, None))
        self.undo.append((table, key, before))
        t._put(new_key, after)
        self.ops.append(Op(table, "update", before, after, stmt or self.statement(), self._tick()))
        return True

    def delete(self, table: str, key: tuple, stmt: int | None = None) -> None:
        t = self.db.tables[table]
        before = t.rows[key]
        t._remove(key)
        self.undo.append((table, key, before))
        self.ops.append(Op(table, "delete", before, None, stmt or self.statement(), self._tick()))

    def on_rollback(self, undo) -> None:
        """Undo bookkeeping outside the tables (e.g. lines per order) if the work rolls back."""
        self.undo.append(undo)

    def rollback(self) -> None:
        for entry in reversed(self.undo):
            if callable(entry):
                entry()
                continue
            table, key, before = entry
            t = self.db.tables[table]
            if before is None:
                t._remove(key)
            else:
                t._put(key, before)


class Source:
    """The simulated ``app`` database and the workload's transaction kinds."""

    def __init__(self, o: WorkloadOptions):
        self.o = o
        self.rng = random.Random(o.seed)
        self.tables = {name: Table(spec) for name, spec in TABLES.items()}
        self.next_account = 1
        self.next_order = 1
        self.next_device = 1
        self.lines_of: dict[int, list[int]] = {}  # order_id -> line numbers (live rows)

    # -- row builders ------------------------------------------------------------------------
    def account_row(self, aid: int, t_s: int) -> dict:
        r = self.rng
        name = f"user{aid:07d}"
        return {"account_id": aid, "name": name, "email": f"{name}@example.com", "tier": r.choice(TIERS[:3]),
                "balance": round(r.uniform(0, 500), 2), "city": r.choice(CITIES + [None]), "updated_at": iso_s(t_s)}

    def device_row(self, did: int, t_s: int) -> dict:
        r = self.rng
        row = {"device_id": f"dev-{did:07d}", "model": r.choice(MODELS), "firmware": f"{r.randint(1, 3)}.{r.randint(0, 9)}",
               "site": r.choice(SITES), "status": "active", "last_seen": iso_s(t_s),
               "owner_id": r.randint(1, max(1, self.next_account - 1))}
        for m in DEVICE_METRICS:
            row[m] = round(r.uniform(0, 1000), 3)
        row["note"] = None
        return row

    def order_key(self) -> tuple | None:
        """A recent order far more often than an old one."""
        orders = self.tables["orders"]
        if not orders.keys:
            return None
        for _ in range(4):
            oid = self.next_order - 1 - int(min(5000, self.next_order) * self.rng.random() ** 2)
            if (oid,) in orders.rows:
                return (oid,)
        return orders.pick(self.rng)

    # -- transaction kinds -------------------------------------------------------------------
    def load_accounts(self, tx: Txn, n: int, t_s: int) -> None:
        stmt = tx.statement()
        for _ in range(n):
            if stmt and len(tx.ops) % 1000 == 999:
                stmt = tx.statement()
            tx.insert("accounts", self.account_row(self.next_account, t_s), stmt)
            self.next_account += 1

    def load_devices(self, tx: Txn, n: int, t_s: int) -> None:
        stmt = tx.statement()
        for _ in range(n):
            if len(tx.ops) % 500 == 499:
                stmt = tx.statement()
            tx.insert("devices", self.device_row(self.next_device, t_s), stmt)
            self.next_device += 1

    def bulk_update(self, tx: Txn, n: int, t_s: int) -> None:
        """A very large transaction: a firmware roll-out over many devices, or a re-pricing of
        many open order lines, one statement per 1000 rows."""
        r = self.rng
        if "devices" in self.o.tables and self.tables["devices"].keys and r.random() < 0.6:
            fw = f"{r.randint(4, 9)}.{r.randint(0, 9)}"
            keys = list(self.tables["devices"].keys)
            r.shuffle(keys)
            stmt = 0
            for i, k in enumerate(keys[:n]):
                if i % 1000 == 0:
                    stmt = tx.statement()
                tx.update("devices", k, {"firmware": fw, "last_seen": iso_s(t_s)}, stmt)
            return
        table = "order_lines" if "order_lines" in self.o.tables and self.tables["order_lines"].keys else "accounts"
        keys = list(self.tables[table].keys)
        r.shuffle(keys)
        stmt = 0
        for i, k in enumerate(keys[:n]):
            if i % 1000 == 0:
                stmt = tx.statement()
            row = self.tables[table].rows[k]
            change = {"price": round(row["price"] * 1.05, 2)} if table == "order_lines" else {"balance": round(row["balance"] + 1, 2)}
            tx.update(table, k, {**change, "updated_at": iso_s(t_s)}, stmt)

    def k_new_order(self, tx: Txn, t_s: int) -> bool:
        r = self.rng
        if "orders" not in self.o.tables:
            return False
        accounts = self.tables["accounts"]
        acc = accounts.pick(r, 3.0)
        oid = self.next_order
        self.next_order += 1
        n_lines = r.choice([1, 1, 2, 2, 3, 4, 6]) if "order_lines" in self.o.tables else 0
        lines = [{"order_id": oid, "line_no": i, "sku": f"SKU-{r.randint(1, 5000):05d}", "qty": r.randint(1, 4),
                  "price": round(r.uniform(2, 120), 2), "updated_at": iso_s(t_s)} for i in range(1, n_lines + 1)]
        total = round(sum(li["qty"] * li["price"] for li in lines), 2)
        two_step = r.random() < 0.25
        tx.insert("orders", {"order_id": oid, "account_id": acc[0] if acc else None, "status": "new",
                             "total": 0.0 if two_step else total, "currency": "EUR", "channel": r.choice(CHANNELS),
                             "created_at": iso_s(t_s), "updated_at": iso_s(t_s), "items": n_lines,
                             "discount": 0.0, "tax": round(total * 0.19, 2), "note": None})
        if lines:
            stmt = tx.statement()
            for li in lines:
                tx.insert("order_lines", li, stmt)
        self.lines_of[oid] = [li["line_no"] for li in lines]
        tx.on_rollback(lambda: self.lines_of.pop(oid, None))
        if two_step:  # INSERT then UPDATE of one row in one transaction
            tx.update("orders", (oid,), {"total": total})
        if acc and "accounts" in self.o.tables:
            bal = accounts.rows[acc]["balance"]
            tx.update("accounts", acc, {"balance": round(bal + total, 2), "updated_at": iso_s(t_s)})
        return True

    def k_order_status(self, tx: Txn, t_s: int) -> bool:
        k = self.order_key() if "orders" in self.o.tables else None
        if k is None:
            return False
        orders = self.tables["orders"]
        steps = 2 if self.rng.random() < 0.15 else 1  # UPDATE then UPDATE
        done = False
        for _ in range(steps):
            status = orders.rows[k]["status"]
            if status not in STATUSES[:-1]:
                break
            done |= tx.update("orders", k, {"status": STATUSES[STATUSES.index(status) + 1], "updated_at": iso_s(t_s)})
        return done

    def k_telemetry(self, tx: Txn, t_s: int) -> bool:
        r = self.rng
        devices = self.tables["devices"]
        if "devices" not in self.o.tables or not devices.keys:
            return False
        stmt = tx.statement()
        seen = set()
        for _ in range(r.choice([1, 1, 2, 4, 8, 16])):
            k = devices.pick(r, 2.5)
            if k in seen:
                continue
            seen.add(k)
            changes = {m: round(r.uniform(0, 1000), 3) for m in r.sample(DEVICE_METRICS, r.randint(2, 6))}
            changes["last_seen"] = iso_s(t_s)
            tx.update("devices", k, changes, stmt)
        return True

    def k_account_update(self, tx: Txn, t_s: int) -> bool:
        r = self.rng
        accounts = self.tables["accounts"]
        k = accounts.pick(r, 3.0)
        if "accounts" not in self.o.tables or k is None:
            return False
        col = r.choice(["tier", "city", "email", "city"])
        value = {"tier": r.choice(TIERS), "city": None if r.random() < 0.2 else r.choice(CITIES),
                 "email": f"user{k[0]:07d}.{r.randint(1, 999)}@example.com"}[col]
        return tx.update("accounts", k, {col: value, "updated_at": iso_s(t_s)})

    def k_signup(self, tx: Txn, t_s: int) -> bool:
        if "accounts" not in self.o.tables:
            return False
        aid = self.next_account
        self.next_account += 1
        tx.insert("accounts", self.account_row(aid, t_s))
        x = self.rng.random()
        if x < 0.2:  # INSERT then UPDATE
            tx.update("accounts", (aid,), {"tier": "silver"})
        elif x < 0.3:  # INSERT then DELETE: nothing
            tx.delete("accounts", (aid,))
        return True

    def k_cancel_order(self, tx: Txn, t_s: int) -> bool:
        k = self.order_key() if "orders" in self.o.tables else None
        if k is None:
            return False
        if self.rng.random() < 0.5:  # UPDATE then DELETE
            tx.update("orders", k, {"status": "cancelled", "updated_at": iso_s(t_s)})
        lines = self.lines_of.pop(k[0], [])
        tx.on_rollback(lambda: self.lines_of.__setitem__(k[0], lines))
        if lines:
            stmt = tx.statement()
            for ln in lines:
                tx.delete("order_lines", (k[0], ln), stmt)
        tx.delete("orders", k)
        return True

    def k_edit_order(self, tx: Txn, t_s: int) -> bool:
        r = self.rng
        k = self.order_key() if "order_lines" in self.o.tables else None
        lines = self.lines_of.get(k[0]) if k else None
        if not lines:
            return False
        oid = k[0]
        variant = r.choice(["qty", "qty", "replace", "renumber"])
        if variant == "qty":
            ln = r.choice(lines)
            qty = self.tables["order_lines"].rows[(oid, ln)]["qty"]
            return tx.update("order_lines", (oid, ln), {"qty": qty + 1, "updated_at": iso_s(t_s)})
        if variant == "replace":  # DELETE then INSERT of one key: an UPDATE
            ln = r.choice(lines)
            old = self.tables["order_lines"].rows[(oid, ln)]
            tx.delete("order_lines", (oid, ln))
            tx.insert("order_lines", {**old, "sku": f"SKU-{r.randint(1, 5000):05d}", "updated_at": iso_s(t_s)})
            return True
        # renumber: drop the first line, move the others down: key-changing updates
        lines.sort()
        tx.on_rollback(lambda: self.lines_of.__setitem__(oid, lines))
        tx.delete("order_lines", (oid, lines[0]))
        stmt = tx.statement()
        for ln in lines[1:]:
            tx.update("order_lines", (oid, ln), {"line_no": ln - 1}, stmt)
        self.lines_of[oid] = [ln - 1 for ln in lines[1:]]
        return True

    def k_device_churn(self, tx: Txn, t_s: int) -> bool:
        devices = self.tables["devices"]
        if "devices" not in self.o.tables:
            return False
        if devices.keys and self.rng.random() < 0.5:
            tx.delete("devices", devices.pick(self.rng))
        else:
            tx.insert("devices", self.device_row(self.next_device, t_s))
            self.next_device += 1
        return True

    def k_move_account(self, tx: Txn, t_s: int) -> bool:
        """Admin moves an account to a new id (a key-changing update) and re-points its orders."""
        accounts = self.tables["accounts"]
        k = accounts.pick(self.rng)
        if "accounts" not in self.o.tables or k is None:
            return False
        new_id = self.next_account
        self.next_account += 1
        tx.update("accounts", k, {"account_id": new_id, "updated_at": iso_s(t_s)})
        if "orders" in self.o.tables:
            orders = self.tables["orders"]
            mine = [ok for ok in orders.keys[-200:] if orders.rows[ok]["account_id"] == k[0]]
            stmt = tx.statement()
            for ok in sorted(mine):
                tx.update("orders", ok, {"account_id": new_id}, stmt)
        return True

    def k_scheduler(self, tx: Txn, t_s: int) -> bool:
        """Event scheduler: mark stale new orders (no session on its thread: user unknown)."""
        if "orders" not in self.o.tables:
            return False
        orders = self.tables["orders"]
        stale = [k for k in orders.keys[:50] if orders.rows[k]["status"] == "new"][:5]
        if not stale:
            return False
        stmt = tx.statement()
        for k in stale:
            tx.update("orders", k, {"note": "stale", "updated_at": iso_s(t_s)}, stmt)
        return True


# ------------------------------------------------------------------------------------------
# Writers
# ------------------------------------------------------------------------------------------
class BinlogWriter:
    def __init__(self, root: Path, events_per_file: int, split_transactions: bool = False,
                 first_file: int = 1, gtid: int = 1000, xid: int = 50_000):
        """``first_file``, ``gtid``, ``xid``: where the log starts (a continuation starts after
        the last file, GTID and XID of the log it continues: bench/continuation.py)."""
        self.per_file = events_per_file
        # a transaction much bigger than a file always continues in the next one
        self.split_at = events_per_file if split_transactions else events_per_file * 3 // 2
        self.files = FileSeries(binlog_dir(root, BINLOG_SOURCE), lambda n: f"{binlog_file_name(n)}.jsonl", first_file)
        self.pos = FILE_START_POS
        self.lines = 0
        self.bytes = 0
        self.gtid = gtid  # the last GTID sequence number / XID used
        self.xid = xid

    @property
    def n_file(self) -> int:
        return self.files.number

    def _rotate(self) -> None:
        self.files.rotate()
        self.pos = FILE_START_POS

    def _emit(self, ts, gtid, etype, xid=None, thread_id=None, schema=None, table=None, pk=None, rows=None) -> None:
        line = _dumps(binlog_event(SERVER_ID, binlog_file_name(self.n_file), self.pos, ts, gtid, etype, xid=xid,
                                   thread_id=thread_id, schema=schema, table=table, primary_key=pk, rows=rows))
        self.files.write(line)
        self.pos += len(line) + 1  # a position counts the line and its newline
        self.lines += 1
        self.bytes += (len(line.encode("utf-8")) if not line.isascii() else len(line)) + 1
        if self.files.lines >= self.split_at and etype not in ("commit", "rollback"):
            self._rotate()

    def write(self, tx: Txn, outcome: str, begin_s: int, end_s: int, thread_id: int, with_gtid: bool, with_xid: bool) -> None:
        if self.files.lines >= self.per_file:
            self._rotate()  # rotate at a transaction boundary
        gtid = None
        if with_gtid:
            self.gtid += 1
            gtid = f"0-{SERVER_ID}-{self.gtid}"
        self._emit(begin_s, gtid, "begin", thread_id=thread_id)
        i, ops = 0, tx.ops
        while i < len(ops):  # one row event per statement and table
            j = i
            while j < len(ops) and ops[j].stmt == ops[i].stmt and ops[j].kind == ops[i].kind and ops[j].table == ops[i].table:
                j += 1
            first = ops[i]
            rows = [row_image(op.before, op.after) for op in ops[i:j]]
            self._emit(min(end_s, begin_s + (first.t_us - tx.ops[0].t_us) // 1_000_000), gtid, first.kind,
                       schema=SCHEMA, table=first.table, pk=list(TABLES[first.table].keys), rows=rows)
            i = j
        if outcome == "commit":
            xid = None
            if with_xid:
                self.xid += 1
                xid = self.xid
            self._emit(end_s, gtid, "commit", xid=xid)
        elif outcome == "rollback":
            self._emit(end_s, gtid, "rollback")

    def close(self) -> None:
        self.files.close()


class ShadowWriter:
    """Transaction rows and change rows, cut into numbered files of ``txns_per_file``
    transactions: a file of each table's change rows beside each transaction file."""

    def __init__(self, root: Path, tables: tuple[str, ...], txns_per_file: int):
        self.root = root
        self.tables = tables
        self.per_file = txns_per_file
        self.in_file = 0
        self.txn_files = FileSeries(transactions_dir(root, SHADOW_SOURCE), lambda n: numbered_file("txns", n, 5))
        self.change_f: dict[str, LandingFile] = {}
        self.change_rows = 0
        self.txn_rows = 0
        self.pg_xid = 900_000

    def _rotate(self) -> None:
        self._close_changes()
        self.txn_files.rotate()
        self.in_file = 0

    def _close_changes(self) -> None:
        for f in self.change_f.values():
            f.close()
        self.change_f = {}

    def _changes(self, table: str) -> LandingFile:
        f = self.change_f.get(table)
        if f is None:
            name = numbered_file("changes", self.txn_files.number, 5)
            f = self.change_f[table] = LandingFile(shadow_table_dir(self.root, SHADOW_SOURCE, SCHEMA, table) / name)
        return f

    def write(self, tx: Txn, outcome: str, end_us: int, user: str, role: str) -> None:
        if outcome == "rollback":
            return  # the triggers' rows die with the transaction
        if self.in_file >= self.per_file:
            self._rotate()
        self.in_file += 1
        self.pg_xid += 1
        txn_id = str(self.pg_xid)
        for seq, op in enumerate(tx.ops, 1):
            row = change_row_of(txn_id, iso_us(op.t_us), seq, TABLES[op.table].keys, op.before, op.after)
            self._changes(op.table).write(_dumps(row))
            self.change_rows += 1
        if outcome == "commit":  # an open transaction's row never arrives: its changes are held
            self.txn_files.write(_dumps(transaction_row(txn_id, iso_us(end_us), user, role, None, "bench")))
            self.txn_rows += 1

    def close(self) -> None:
        self._close_changes()
        self.txn_files.close()


# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------
def generate(out: str | Path, options: WorkloadOptions | None = None, clean: bool = True) -> WorkloadSummary:
    """Write ``<out>/landing/...``, ``<out>/expected/...`` and ``<out>/onboarding.yml``."""
    o = (options or WorkloadOptions()).resolved()
    out = Path(out)
    landing = out / "landing"
    if clean:
        for d in (landing / BINLOG_SOURCE, landing / SHADOW_SOURCE, out / "expected"):
            shutil.rmtree(d, ignore_errors=True)
    landing.mkdir(parents=True, exist_ok=True)
    db = Source(o)
    rng = db.rng
    summary = WorkloadSummary(options=asdict(o))
    by_table = {t: {"inserts": 0, "updates": 0, "deletes": 0} for t in TABLES}
    binlog = BinlogWriter(landing, o.events_per_file, o.split_transactions) if "binlog" in o.forms else None
    shadow = ShadowWriter(landing, o.tables, o.txns_per_shadow_file) if "shadow" in o.forms else None

    sessions = [session(SERVER_ID, tid, iso_s(START_S - 600 + i * 7), u, role)
                for i, (u, (role, tid)) in enumerate(USERS.items())]
    thread_of = {u: tid for u, (_, tid) in USERS.items()}
    next_thread = 40

    now_us = START_S * 1_000_000  # true clock: strictly increasing commit times
    offset_s = 0  # the binlog server's clock error (steps back once)
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    big_every = max(4 * o.big_txn_rows, o.row_changes // 3)
    next_big = big_every
    step_back_at = int(o.row_changes * 0.6)

    plan = []
    if "accounts" in o.tables:
        plan.append(("load_accounts", o.accounts))
    if "devices" in o.tables:
        plan.append(("load_devices", o.devices))

    def finish(tx: Txn, user: str, last: bool, may_roll_back: bool) -> None:
        nonlocal now_us, next_thread, offset_s
        if not tx.ops:
            return
        begin_us = tx.ops[0].t_us - rng.randint(100, 3000)
        end_us = tx.ops[-1].t_us + rng.randint(100, 3000)
        begin_s, end_s = begin_us // 1_000_000 + offset_s, end_us // 1_000_000 + offset_s
        if last and o.open_tail:
            outcome = "open"
        elif may_roll_back and rng.random() < o.rollback_rate:
            outcome = "rollback"
        else:
            outcome = "commit"
        if outcome == "rollback":
            tx.rollback()
        if user == "scheduler":
            thread_id, who, role = SCHEDULER_THREAD, "unknown", "unknown"
        else:
            if rng.random() < 0.01:  # reconnect: a new session on a new thread
                next_thread += rng.randint(1, 3)
                thread_of[user] = next_thread
                sessions.append(session(SERVER_ID, next_thread, iso_s(begin_s - 1), user, USERS[user][0]))
            thread_id, who, role = thread_of[user], user, USERS[user][0]
        if binlog:
            binlog.write(tx, outcome, begin_s, end_s, thread_id, with_gtid=rng.random() > 0.01,
                         with_xid=rng.random() > 0.01)
        if shadow:
            shadow.write(tx, outcome, end_us, who, role)
        summary.transactions += 1
        summary.row_changes += len(tx.ops)
        summary.largest_txn_rows = max(summary.largest_txn_rows, len(tx.ops))
        if outcome == "commit":
            summary.committed += 1
            summary.committed_row_changes += len(tx.ops)
            summary.multi_table_txns += len({op.table for op in tx.ops}) > 1
            for op in tx.ops:
                by_table[op.table][op.kind + "s"] += 1
                summary.deletes += op.kind == "delete"
                if op.kind == "update":
                    summary.key_changes += any(op.before[k] != op.after[k] for k in TABLES[op.table].keys)
        elif outcome == "rollback":
            summary.rolled_back += 1
        else:
            summary.open += 1
        # Commits often share a second (binlog resolution); once, the binlog clock steps back.
        now_us = end_us
        if offset_s == 0 and summary.row_changes >= step_back_at:
            offset_s = -5

    while summary.row_changes < o.row_changes:
        budget = o.row_changes - summary.row_changes
        gap = rng.randint(1_000, 150_000) if rng.random() < 0.7 else rng.randint(150_000, 2_500_000)
        t0 = now_us + gap
        t_s = t0 // 1_000_000
        tx = Txn(db, "etl", t0)
        may_roll_back = True
        if plan:
            kind, n = plan.pop(0)
            getattr(db, kind)(tx, min(n, budget), t_s)
            user, may_roll_back = "etl", False
        elif summary.row_changes >= next_big and budget > o.big_txn_rows // 2:
            next_big += big_every
            db.bulk_update(tx, min(o.big_txn_rows, budget), t_s)
            user, may_roll_back = "etl", False
        else:
            for _ in range(20):
                kind = rng.choices(kinds, weights)[0]
                user = USER_OF_KIND.get(kind, rng.choice(["api", "api2"]))
                if getattr(db, f"k_{kind}")(tx, t_s):
                    break
                tx.rollback()
                tx = Txn(db, user, t0)
        done = summary.row_changes + len(tx.ops) >= o.row_changes
        finish(tx, user, last=done, may_roll_back=may_roll_back)

    if binlog:
        binlog.close()
        summary.binlog_lines, summary.binlog_files, summary.binlog_bytes = binlog.lines, binlog.n_file, binlog.bytes
        write_file(sessions_dir(landing, BINLOG_SOURCE) / numbered_file("sessions", 1), [_dumps(s) for s in sessions])
    if shadow:
        shadow.close()
        summary.shadow_change_rows, summary.shadow_txn_rows = shadow.change_rows, shadow.txn_rows

    # The open tail's work is not committed: undo it for the expected state.
    if summary.open:
        _undo_open_tail(db, tx)
    for name in o.tables:
        t = db.tables[name]
        summary.final_rows[name] = len(t.rows)
        rows = [t.rows[k] for k in sorted(t.rows)]
        for source in [s for s, f in ((BINLOG_SOURCE, "binlog"), (SHADOW_SOURCE, "shadow")) if f in o.forms]:
            path = out / "expected" / source / f"{SCHEMA}.{name}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                for r in rows:
                    f.write(_dumps(r) + "\n")
    summary.by_table = {t: by_table[t] for t in o.tables}
    write_onboarding(out / "onboarding.yml", o.tables, o.forms)
    (out / "workload.json").write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    return summary


def _undo_open_tail(db: Source, tx: Txn) -> None:
    tx.rollback()


# ------------------------------------------------------------------------------------------
# Onboarding
# ------------------------------------------------------------------------------------------
def onboarding_flows(tables: tuple[str, ...], forms: tuple[str, ...]) -> list[dict]:
    flows = []
    for form, source, base in (("binlog", BINLOG_SOURCE, 901), ("shadow", SHADOW_SOURCE, 951)):
        if form not in forms:
            continue
        for i, name in enumerate(tables):
            spec = TABLES[name]
            cdc = {
                "keys": list(spec.keys),
                "sequence_by": "__sequence",
                "scd_type": str(spec.scd_type),
                "apply_as_deletes": "__op = 'DELETE'",
                "except_column_list": ["__op", "__sequence", "__commit_ts", "__txn_id"],
            }
            if spec.track_history:
                cdc["track_history_column_list"] = list(spec.track_history)
            flows.append({
                "data_flow_id": str(base + i),
                "data_flow_group": "bench",
                "source_system": "MariaDB" if form == "binlog" else "PostgreSQL",
                "source_format": "cloudFiles",
                "source_details": {"source_database": SCHEMA, "source_table": name},
                "bronze_database_dev": "cdc_bronze_dev",
                "bronze_table": f"{source}_binlog_events" if form == "binlog" else f"{source}_shadow_{name}",
                "bronze_reader_options": {"cloudFiles.format": "json", "cloudFiles.rescuedDataColumn": "_rescued_data"},
                "bronze_table_properties": {"pipelines.reset.allowed": "false"},
                "silver_database_dev": "cdc_silver_dev",
                "silver_table": f"{source}_{name}",
                "silver_cdc_apply_changes": cdc,
                "cdc_lakehouse": {"capture": form, "source": source},
            })
    return flows


def write_onboarding(path: Path, tables: tuple[str, ...], forms: tuple[str, ...]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Generated by bench/workload.py: the benchmark workload's tables, both capture forms.\n"
        + yaml.safe_dump(onboarding_flows(tables, forms), sort_keys=False)
    )
    return path


def read_expected(out: str | Path, source: str, table: str) -> list[dict]:
    path = Path(out) / "expected" / source / f"{SCHEMA}.{table}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
