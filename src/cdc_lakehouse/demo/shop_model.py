"""The shop demo database as data: its tables, people and sessions, and the logical workload
(transactions of row operations) the simulation produces (``shop_simulation``) and the landing
forms are written from (``shop_landing``). Times are true-clock epoch microseconds unless named
otherwise; everything is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import ROUND_HALF_UP, Decimal

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


def money(x: Decimal) -> Decimal:
    return x.quantize(CENT, rounding=ROUND_HALF_UP)


def key_of(table: str, row: dict) -> tuple:
    return tuple(row[c] for c in KEYS[table])


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
