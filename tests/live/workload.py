"""A seeded random workload of interleaved multi-table transactions on a live server.

Several connections, each logged in as its own user, keep transactions open at the same time:
inserts, updates (also of key columns, also to NULL), deletes, several operations on one row,
savepoints rolled back to, and whole transactions rolled back. One thread drives them all, so
the run is reproducible; a connection never touches a row another open transaction touched, so
nothing waits on a lock. Every transaction also inserts its number into ``txlog``, which is how
a test finds out, from captured data alone, which workload transaction a captured one is.

``on_step`` is called every few steps while transactions are open, e.g. to run the capture
tools mid-workload.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Callable

SCHEMA = "shop"
HOSTILE_TABLE = 'odd "t"; --'

# table -> (columns as (name, type), key columns); types: int, text, dec, ts
TABLES: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "customers": ([("customer_id", "int"), ("name", "text"), ("email", "text"), ("city", "text"),
                   ("tier", "text")], ["customer_id"]),
    "products": ([("product_id", "int"), ("sku", "text"), ("name", "text"), ("price", "dec"),
                  ("stock", "int")], ["product_id"]),
    "orders": ([("order_id", "int"), ("customer_id", "int"), ("status", "text"), ("total", "dec"),
                ("created_at", "ts")], ["order_id"]),
    "order_items": ([("order_id", "int"), ("line_no", "int"), ("product_id", "int"), ("qty", "int"),
                     ("price", "dec")], ["order_id", "line_no"]),
    HOSTILE_TABLE: ([("id", "int"), ("select", "text"), ("Mixed Case", "text")], ["id"]),
    "txlog": ([("txn_no", "int"), ("actor", "text"), ("note", "text")], ["txn_no"]),
}
SQL_TYPES = {
    "postgres": {"int": "integer", "text": "varchar(200)", "dec": "numeric(12,2)", "ts": "timestamp(6)"},
    "mariadb": {"int": "int", "text": "varchar(200)", "dec": "decimal(12,2)", "ts": "datetime(6)"},
}
# user -> (role it works as, roles it may switch to with SET ROLE (PostgreSQL only))
USERS = {
    "alice": ("app_writer", ["app_writer", "support"]),
    "bob": ("app_writer", []),
    "carol": ("support", []),
    "etl": ("etl_batch", []),
    "dave": (None, []),  # works with direct grants, no role
}
ROLES = ("app_writer", "support", "etl_batch")
PASSWORD = "pw-Live-1"
WORDS = ["Zoë", "São Paulo", "O'Brien", 'say "hi"', "back\\slash", "Kraków", "tab\there", "日本",
         "plain", "Müller", "semi;colon", "50% off", "--dash", "emoji 🎉"]
STATUSES = ["new", "paid", "shipped", "delivered", "cancelled"]
BASE_TS = datetime(2026, 3, 2, 9, 0, 0)


def qi(dialect: str, name: str) -> str:
    if dialect == "postgres":
        return '"' + name.replace('"', '""') + '"'
    return "`" + name.replace("`", "``") + "`"


def table_sql(dialect: str, schema: str, table: str) -> str:
    return f"{qi(dialect, schema)}.{qi(dialect, table)}"


def setup_schema(conn, dialect: str, schema: str = SCHEMA) -> None:
    """Tables, roles and users (idempotent for roles and users: servers are shared by tests)."""
    cur = conn.cursor()
    types = SQL_TYPES[dialect]
    cur.execute(f"CREATE SCHEMA {qi(dialect, schema)}" if dialect == "postgres"
                else f"CREATE DATABASE {qi(dialect, schema)} CHARACTER SET utf8mb4")
    for table, (cols, keys) in TABLES.items():
        col_sql = ", ".join(f"{qi(dialect, c)} {types[t]}" + (" NOT NULL" if c in keys else "")
                            for c, t in cols)
        pk = ", ".join(qi(dialect, k) for k in keys)
        cur.execute(f"CREATE TABLE {table_sql(dialect, schema, table)} ({col_sql}, PRIMARY KEY ({pk}))")
    (_pg_principals if dialect == "postgres" else _maria_principals)(cur, schema)


def _pg_principals(cur, schema: str) -> None:
    for role in ROLES:
        cur.execute(f"DO $$BEGIN CREATE ROLE {role} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END$$")
    for user, (_, switch) in USERS.items():
        cur.execute(f"DO $$BEGIN CREATE ROLE {user} LOGIN PASSWORD '{PASSWORD}'; "
                    f"EXCEPTION WHEN duplicate_object THEN NULL; END$$")
        for role in set(switch) | ({USERS[user][0]} - {None}):
            cur.execute(f"GRANT {role} TO {user}")
    for grantee in (*ROLES, "dave"):
        cur.execute(f"GRANT USAGE ON SCHEMA {qi('postgres', schema)} TO {grantee}")
        cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
                    f"{qi('postgres', schema)} TO {grantee}")


def _maria_principals(cur, schema: str) -> None:
    for role in ROLES:
        cur.execute(f"CREATE ROLE IF NOT EXISTS {role}")
        cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {qi('mariadb', schema)}.* TO {role}")
    for user, (role, _) in USERS.items():
        cur.execute(f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{PASSWORD}'")
        if role:
            cur.execute(f"GRANT {role} TO '{user}'@'%'")
            cur.execute(f"SET DEFAULT ROLE {role} FOR '{user}'@'%'")
        else:
            cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {qi('mariadb', schema)}.* TO '{user}'@'%'")


@dataclass
class Txn:
    no: int
    user: str
    role: str | None
    changes: dict = field(default_factory=dict)  # (table, key) -> row or None (deleted)
    touched: set = field(default_factory=set)  # (table, key) this transaction locked
    ops: int = 0


@dataclass
class WorkloadResult:
    dialect: str
    schema: str
    identities: dict[int, tuple[str, str | None]]  # committed txn_no -> (user, role)
    rolled_back: list[int]
    model: dict[str, dict[tuple, dict]]  # final state the workload believes in
    ops: int = 0


class Workload:
    def __init__(self, server, dialect: str, schema: str, seed: int, n_txns: int,
                 on_step: Callable[[], None] | None = None, step_every: int = 40):
        self.server, self.dialect, self.schema = server, dialect, schema
        self.rng = random.Random(seed)
        self.n_txns, self.on_step, self.step_every = n_txns, on_step, step_every
        self.state: dict[str, dict[tuple, dict]] = {t: {} for t in TABLES}
        self.open: dict[str, Txn] = {}
        self.next_id = 1
        self.next_txn = 1
        self.result = WorkloadResult(dialect, schema, {}, [], self.state)
        self.conns = {user: self._connect(user) for user in USERS}

    # ---- connections -----------------------------------------------------------------
    def _connect(self, user: str):
        if self.dialect == "postgres":
            conn = self.server.connect(user=user, autocommit=True)
            role = USERS[user][0]
            if role:
                conn.execute(f"SET ROLE {role}")
            return conn
        return self.server.connect(user=user, password=PASSWORD)

    def _exec(self, user: str, sql: str, params=()) -> None:
        conn = self.conns[user]
        if self.dialect == "postgres":
            conn.execute(sql, params)
        else:
            with conn.cursor() as cur:
                cur.execute(sql, params)

    def _role_of(self, user: str) -> str | None:
        default, switch = USERS[user]
        if self.dialect == "postgres" and switch and self.rng.random() < 0.5:
            role = self.rng.choice(switch)
            self._exec(user, f"SET ROLE {role}")
            self._pg_roles[user] = role
        return self._pg_roles.get(user, default) if self.dialect == "postgres" else default

    # ---- the run -----------------------------------------------------------------------
    def run(self) -> WorkloadResult:
        self._pg_roles: dict[str, str | None] = {}
        step = 0
        while self.next_txn <= self.n_txns or self.open:
            user = self.rng.choice(list(USERS))
            txn = self.open.get(user)
            if txn is None:
                if self.next_txn <= self.n_txns:
                    self._begin(user)
            elif txn.ops >= 2 and (self.rng.random() < 0.25 or self.next_txn > self.n_txns):
                self._end(user)
            else:
                self._random_op(txn)
            step += 1
            if self.on_step and step % self.step_every == 0 and self.open:
                self.on_step()
        for conn in self.conns.values():
            conn.close()
        return self.result

    def _begin(self, user: str) -> None:
        role = self._role_of(user)
        txn = Txn(self.next_txn, user, role)
        self.next_txn += 1
        self._exec(user, "BEGIN")
        self.open[user] = txn
        self._insert(txn, "txlog", {"txn_no": txn.no, "actor": user, "note": self.rng.choice(WORDS)})

    def _end(self, user: str) -> None:
        txn = self.open.pop(user)
        if self.rng.random() < 0.15:
            self._exec(user, "ROLLBACK")
            self.result.rolled_back.append(txn.no)
            return
        self._exec(user, "COMMIT")
        for (table, key), row in txn.changes.items():
            if row is None:
                self.state[table].pop(key, None)
            else:
                self.state[table][key] = row
        self.result.identities[txn.no] = (user, txn.role)

    # ---- the view of one transaction ---------------------------------------------------
    def _view(self, txn: Txn, table: str) -> dict[tuple, dict]:
        rows = dict(self.state[table])
        for (t, key), row in txn.changes.items():
            if t == table:
                if row is None:
                    rows.pop(key, None)
                else:
                    rows[key] = row
        return rows

    def _locked(self, txn: Txn, table: str, key: tuple) -> bool:
        return any((table, key) in other.touched for other in self.open.values() if other is not txn)

    def _fresh_key(self, table: str) -> tuple:
        self.next_id += 1
        if table == "order_items":
            return (self.next_id, self.rng.randint(1, 4))
        return (self.next_id,)

    # ---- operations ----------------------------------------------------------------------
    def _random_op(self, txn: Txn) -> None:
        table = self.rng.choice([t for t in TABLES if t != "txlog"])
        view = self._view(txn, table)
        own = [k for (t, k) in txn.touched if t == table and k in view]
        free = [k for k in view if not self._locked(txn, table, k)]
        pick = own if own and self.rng.random() < 0.4 else free
        roll = self.rng.random()
        if not pick or roll < 0.35:
            deleted = [k for (t, k), row in txn.changes.items() if t == table and row is None
                       and k not in view]
            key = self.rng.choice(deleted) if deleted and self.rng.random() < 0.3 else self._fresh_key(table)
            self._insert(txn, table, self._new_row(table, key))
        elif roll < 0.4 and self.rng.random() < 0.5:
            self._savepoint_op(txn, table, self.rng.choice(sorted(pick)))
        elif roll < 0.75:
            self._update(txn, table, self.rng.choice(sorted(pick)), view)
        elif roll < 0.85:
            self._change_key(txn, table, self.rng.choice(sorted(pick)), view)
        else:
            self._delete(txn, table, self.rng.choice(sorted(pick)))
        txn.ops += 1
        self.result.ops += 1

    def _savepoint_op(self, txn: Txn, table: str, key: tuple) -> None:
        """An update that is rolled back to a savepoint: it must never reach any replica."""
        saved = dict(txn.changes)
        self._exec(txn.user, "SAVEPOINT sp")
        self._update(txn, table, key, self._view(txn, table))
        self._exec(txn.user, "ROLLBACK TO SAVEPOINT sp")
        txn.changes = saved

    def _new_row(self, table: str, key: tuple) -> dict:
        cols, keys = TABLES[table]
        row = {c: self._value(t) for c, t in cols}
        row.update(zip(keys, key))
        return row

    def _value(self, kind: str, nullable: bool = False):
        if nullable and self.rng.random() < 0.1:
            return None
        if kind == "int":
            return self.rng.randint(0, 5000)
        if kind == "dec":
            return Decimal(self.rng.randint(0, 10_000_000)) / 100
        if kind == "ts":
            return BASE_TS + timedelta(microseconds=self.rng.randint(0, 10**12))
        return self.rng.choice(WORDS + STATUSES) + f" {self.rng.randint(0, 999)}"

    def _where(self, table: str, key: tuple) -> tuple[str, tuple]:
        keys = TABLES[table][1]
        return " AND ".join(f"{qi(self.dialect, k)} = %s" for k in keys), key

    def _insert(self, txn: Txn, table: str, row: dict) -> None:
        cols = list(row)
        sql = (f"INSERT INTO {table_sql(self.dialect, self.schema, table)} "
               f"({', '.join(qi(self.dialect, c) for c in cols)}) VALUES ({', '.join(['%s'] * len(cols))})")
        self._exec(txn.user, sql, tuple(row.values()))
        key = tuple(row[k] for k in TABLES[table][1])
        txn.changes[(table, key)] = row
        txn.touched.add((table, key))

    def _update(self, txn: Txn, table: str, key: tuple, view: dict) -> None:
        cols, keys = TABLES[table]
        choices = [(c, t) for c, t in cols if c not in keys]
        chosen = self.rng.sample(choices, self.rng.randint(1, len(choices)))
        new = {c: self._value(t, nullable=True) for c, t in chosen}
        self._apply_update(txn, table, key, view[key], new)

    def _change_key(self, txn: Txn, table: str, key: tuple, view: dict) -> None:
        new_key = self._fresh_key(table)
        changes = dict(zip(TABLES[table][1], new_key))
        if self.rng.random() < 0.5:
            c, t = self.rng.choice([(c, t) for c, t in TABLES[table][0] if c not in TABLES[table][1]])
            changes[c] = self._value(t, nullable=True)
        self._apply_update(txn, table, key, view[key], changes)

    def _apply_update(self, txn: Txn, table: str, key: tuple, before: dict, changes: dict) -> None:
        where, params = self._where(table, key)
        sets = ", ".join(f"{qi(self.dialect, c)} = %s" for c in changes)
        self._exec(txn.user, f"UPDATE {table_sql(self.dialect, self.schema, table)} SET {sets} "
                             f"WHERE {where}", (*changes.values(), *params))
        after = {**before, **changes}
        new_key = tuple(after[k] for k in TABLES[table][1])
        if new_key != key:
            txn.changes[(table, key)] = None
        txn.changes[(table, new_key)] = after
        txn.touched |= {(table, key), (table, new_key)}

    def _delete(self, txn: Txn, table: str, key: tuple) -> None:
        where, params = self._where(table, key)
        self._exec(txn.user, f"DELETE FROM {table_sql(self.dialect, self.schema, table)} WHERE {where}",
                   params)
        txn.changes[(table, key)] = None
        txn.touched.add((table, key))


def run_workload(server, dialect: str, schema: str = SCHEMA, seed: int = 1, n_txns: int = 60,
                 on_step: Callable[[], None] | None = None, step_every: int = 40) -> WorkloadResult:
    """Run the workload on tables already created by :func:`setup_schema`."""
    return Workload(server, dialect, schema, seed, n_txns, on_step, step_every).run()
