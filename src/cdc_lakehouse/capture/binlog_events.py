"""python-mysql-replication events -> CONTRACT §2.1 events, one finished transaction at a time.

Events are held until their transaction ends (as JSON lines in an event buffer, which spills
to disk past a bound: capture/event_buffer.py), because on MariaDB the thread that ran a
transaction is only known from inside it: MariaDB before 11.5 writes no thread id for row-based
transactions (its GTID event replaces MySQL's ``BEGIN`` query, which carries one). When the
session-marker triggers of :func:`ddl_mariadb.marker_statements` are installed, every
transaction holds row events on ``cdc_capture._binlog_sessions`` naming its thread, user and
role; they fill ``thread_id`` on ``begin`` and yield a §2.2 session, and are not emitted
themselves (their ids are kept so the capture can delete the rows it has read).
On MySQL the ``BEGIN`` query's thread id is used. Row events of the capture schema itself
(shadow tables, the exporter's purges) are dropped, and so are transactions left empty by that.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from .ddl_mariadb import MARKER_TABLE
from .event_buffer import EventBuffer
from cdc_lakehouse.contract.landing import to_json
from cdc_lakehouse.contract.lines import BINLOG_FIELDS, binlog_event, row_image, session
from .sqlquote import CAPTURE_SCHEMA

FIELDS = (*BINLOG_FIELDS, "epoch")  # the capture's events also name their binlog epoch
ROW_TYPES = {WriteRowsEvent: "insert", UpdateRowsEvent: "update", DeleteRowsEvent: "delete"}
STREAM_EVENTS = [MariadbGtidEvent, GtidEvent, QueryEvent, XidEvent, *ROW_TYPES]
_FL_STANDALONE = 1  # MariaDB GTID flag: no COMMIT follows (DDL)
# A DML statement in a query event: logged as SQL (binlog_format STATEMENT or MIXED), so the rows
# it changed are not in the binlog. It lands as a STATEMENT event, which bronze quarantines.
_DML_STATEMENT = re.compile(r"^\s*(?:/\*.*?\*/\s*)*(?:INSERT|UPDATE|DELETE|REPLACE|LOAD\s+(?:DATA|XML))\b", re.I | re.S)
STATEMENT = "statement"
_IGNORED_QUERIES = re.compile(r"^\s*(SAVEPOINT|ROLLBACK\s+TO|RELEASE\s+SAVEPOINT|XA\s)", re.I)
_NAME = r"(?P<name>(?:`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|[\w$]+))?)"
DML_TABLE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(?:(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*(?:\s+INTO)?"
    r"|UPDATE(?:\s+(?:LOW_PRIORITY|IGNORE))*|DELETE(?:\s+(?:LOW_PRIORITY|QUICK|IGNORE))*\s+FROM)\s+" + _NAME, re.I | re.S)
_DDL_TABLE = re.compile(
    r"^\s*(?:ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE|CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE"
    r"|DROP\s+(?:TEMPORARY\s+)?TABLE|TRUNCATE(?:\s+TABLE)?|RENAME\s+TABLE"
    r"|CREATE\s+(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\s+\S+\s+ON|DROP\s+INDEX\s+\S+\s+ON)"
    r"\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?" + _NAME,
    re.I)


@dataclass(frozen=True, order=True)
class Position:
    """A binlog position; orders by epoch (binlog_epoch.py), the file's numeric suffix, then the offset."""

    epoch: int
    file_no: int
    pos: int
    file: str = field(compare=False)

    @classmethod
    def of(cls, file: str, pos: int, epoch: int = 0) -> "Position":
        suffix = file.rsplit(".", 1)[-1]
        return cls(epoch, int(suffix) if suffix.isdigit() else 0, int(pos), file)


@dataclass
class Transaction:
    """A finished transaction's CONTRACT §2.1 events, in log order: ``head`` (the begin, or a
    lone DDL or statement event; empty when nothing was left to emit), ``body`` (the events
    between begin and end, as JSON lines) and ``tail`` (its commit or rollback)."""

    head: list[dict]
    end: Position  # resume here to read the next transaction
    sessions: list[dict] = field(default_factory=list)  # CONTRACT §2.2
    marker_ids: list[int] = field(default_factory=list)  # session-marker rows read
    body: EventBuffer | None = None
    tail: dict | None = None

    @property
    def first_pos(self) -> int:
        return self.head[0]["pos"]

    def __len__(self) -> int:
        return len(self.head) + (len(self.body) if self.body else 0) + (self.tail is not None)

    @property
    def held_bytes(self) -> int:
        return self.body.held_bytes if self.body else 0

    def lines(self) -> Iterator[str]:
        """Every event as a JSON line, in log order."""
        yield from (to_json(e) for e in self.head)
        if self.body:
            yield from self.body.lines()
        if self.tail is not None:
            yield to_json(self.tail)

    def discard(self) -> None:
        if self.body:
            self.body.discard()


def event(server_id: int, file: str, pos: int, ts: int, epoch: int, gtid: str | None, type_: str, **kw) -> dict:
    return {**binlog_event(server_id, file, pos, ts, gtid, type_, **kw), "epoch": epoch}


def _primary_key(value) -> list[str]:
    if not value:
        return []
    return [value] if isinstance(value, str) else list(value)


def _images(kind: str, rows: list[dict]) -> list[dict]:
    if kind == "insert":
        return [row_image(None, r["values"]) for r in rows]
    if kind == "delete":
        return [row_image(r["values"], None) for r in rows]
    return [row_image(r["before_values"], r["after_values"]) for r in rows]


def _unquote(name: str) -> str:
    name = name.strip()
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def ddl_target(query: str, default_schema: str | None, pattern: re.Pattern = _DDL_TABLE) -> tuple[str | None, str | None]:
    """(schema, table) a DDL statement (or with ``DML_TABLE``, a DML one) works on, when it names one."""
    m = pattern.match(query)
    if not m:
        return default_schema, None
    parts = re.findall(r"`(?:[^`]|``)+`|[\w$]+", m.group("name"))
    if len(parts) == 2:
        return _unquote(parts[0]), _unquote(parts[1])
    return default_schema, _unquote(parts[0])


def _default_schema(ev: QueryEvent) -> str | None:
    """The database a query event's session had selected, if any."""
    schema = ev.schema.decode("utf-8", "replace") if isinstance(ev.schema, bytes) else ev.schema
    return schema or None


def session_connected_at(since: datetime) -> str:
    """The marker's ``since`` (statement start, UTC, µs) as a §2.2 ``connected_at``.

    Binlog times have whole seconds, and ``since`` can fall in the same second as the
    transaction's ``ts``; one second earlier, rounded down, compares as before it under ``<``
    and ``<=`` alike, while staying within a second of when the session was first seen.
    """
    return (since.replace(microsecond=0) - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


class Assembler:
    """Feed stream events in log order; get each transaction back when it ends."""

    def __init__(self, capture_schema: str = CAPTURE_SCHEMA, role_of=lambda user, host: None,
                 new_buffer: Callable[[], EventBuffer] = EventBuffer):
        self.capture_schema = capture_schema
        self.role_of = role_of  # (user, host) -> role: markers cannot see roles (see ddl_mariadb)
        self.new_buffer = new_buffer  # holds an open transaction's events
        self.epoch = 0  # of every event and position (binlog_epoch.py)
        self._gtid: str | None = None
        self._begin_event: dict | None = None  # kept whole: its thread_id is known at the end
        self._open: EventBuffer | None = None
        self._marker: dict | None = None
        self._marker_ids: list[int] = []
        self._seen_sessions: set[tuple] = set()

    def feed(self, ev, file: str) -> Transaction | None:
        end = ev.packet.log_pos
        start = end - ev.packet.event_size
        base = (ev.packet.server_id, file, start, ev.timestamp, self.epoch)
        if isinstance(ev, MariadbGtidEvent):
            return self._on_gtid(ev.gtid, bool(ev.flags & _FL_STANDALONE), base)
        if isinstance(ev, GtidEvent):
            self._gtid = ev.gtid
            return None
        if isinstance(ev, QueryEvent):
            return self._on_query(ev, base, Position.of(file, end, self.epoch))
        if isinstance(ev, XidEvent):
            return self._close(event(*base, self._gtid, "commit", xid=ev.xid), Position.of(file, end, self.epoch))
        kind = ROW_TYPES.get(type(ev))
        if kind:
            self._on_rows(ev, kind, base)
        return None

    def abandon(self) -> None:
        """Drop the open transaction (the stream stopped inside it): a restart reads it again."""
        if self._open is not None:
            self._open.discard()
        self._begin_event, self._open = None, None

    def _begin(self, base, thread_id) -> None:
        self._begin_event = event(*base, self._gtid, "begin", thread_id=thread_id)
        self._open = self.new_buffer()
        self._marker = None
        self._marker_ids = []

    def _on_gtid(self, gtid: str, standalone: bool, base) -> None:
        self.abandon()  # a transaction without its end (crash) is never applied: drop it
        self._gtid = gtid
        if not standalone:
            self._begin(base, None)

    def _on_query(self, ev: QueryEvent, base, end: Position) -> Transaction | None:
        query = ev.query.strip()
        word = query.split(None, 1)[0].upper() if query else ""
        if _IGNORED_QUERIES.match(query):
            return None
        if word == "BEGIN":
            if self._open is None:
                self._begin(base, ev.slave_proxy_id)
            return None
        if word in ("COMMIT", "ROLLBACK"):
            if self._open is None:
                return None
            return self._close(event(*base, self._gtid, word.lower()), end)
        if _DML_STATEMENT.match(query):
            return self._statement(ev, query, base, end)
        if self._open is not None:
            return None  # statements inside a row-based transaction carry no change
        return self._ddl(ev, query, base, end)

    def _statement(self, ev: QueryEvent, query: str, base, end: Position) -> Transaction | None:
        """A DML statement logged as SQL: landed as a STATEMENT event in its transaction (or as
        a transaction of its own), never dropped without a word; the capture's own are left out."""
        schema, table = ddl_target(query, _default_schema(ev), DML_TABLE)
        if schema == self.capture_schema or self._names_capture_schema(query):
            return None
        statement = event(*base, self._gtid, STATEMENT, thread_id=ev.slave_proxy_id, schema=schema, table=table,
                          query=query)
        if self._open is not None:
            self._open.append(to_json(statement))
            return None
        gtid, self._gtid = self._gtid, None
        return Transaction([{**statement, "gtid": gtid}], end)

    def _ddl(self, ev: QueryEvent, query: str, base, end: Position) -> Transaction:
        schema, table = ddl_target(query, _default_schema(ev))
        gtid, self._gtid = self._gtid, None
        if schema == self.capture_schema or self._names_capture_schema(query):
            return Transaction([], end)  # capture's own objects (tables, triggers, procedures)
        return Transaction([event(*base, gtid, "ddl", thread_id=ev.slave_proxy_id, schema=schema,
                                  table=table, query=query)], end)

    def _names_capture_schema(self, query: str) -> bool:
        quoted = "`" + self.capture_schema.replace("`", "``") + "`"
        return any(f"{name}." in query for name in (quoted, self.capture_schema))

    def _on_rows(self, ev, kind: str, base) -> None:
        if self._open is None:
            return  # a row event outside a transaction cannot be placed: never seen on ROW binlogs
        if ev.schema == self.capture_schema:
            if ev.table == MARKER_TABLE and kind == "insert":
                self._marker = self._marker or ev.rows[0]["values"]
                self._marker_ids += [int(r["values"]["id"]) for r in ev.rows]
            return
        self._open.append(to_json(event(*base, self._gtid, kind, schema=ev.schema, table=ev.table,
                                        primary_key=_primary_key(ev.primary_key),
                                        rows=_images(kind, ev.rows))))

    def _close(self, last: dict, end: Position) -> Transaction:
        begin, body, marker, marker_ids = self._begin_event, self._open, self._marker, self._marker_ids
        self._begin_event, self._open, self._marker, self._gtid, self._marker_ids = None, None, None, None, []
        if body is None or not len(body):  # nothing left to emit (only capture bookkeeping)
            if body is not None:
                body.discard()
            return Transaction([], end, marker_ids=marker_ids)
        sessions = []
        if marker is not None:
            begin["thread_id"] = int(marker["thread_id"])
            sessions = self._session(last["server_id"], marker)
        return Transaction([begin], end, sessions, marker_ids, body=body, tail=last)

    def _session(self, server_id: int, marker: dict) -> list[dict]:
        row = session(server_id, int(marker["thread_id"]), session_connected_at(marker["since"]),
                      marker["db_user"], self.role_of(marker["db_user"], marker["client"]))
        key = tuple(row.values())
        if key in self._seen_sessions:
            return []
        self._seen_sessions.add(key)
        return [row]
