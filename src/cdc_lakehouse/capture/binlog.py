"""Binlog capture: read a MariaDB/MySQL row-based binlog, write CONTRACT §2.1/§2.2 landing files.

Resume rule: capture restarts at the end of the last *finished* transaction it wrote (commit,
rollback or DDL), so it neither skips nor repeats: whole transactions are written, and a
transaction is written once. The position is kept twice: in each landing file's name
(``<binlog file>-<first pos>-<resume pos>.jsonl``, published atomically with the events) and
in a checkpoint file saved after it. A restart takes the later of the two, so a crash between
publishing a file and saving the checkpoint repeats nothing. Were a file ever repeated (its
checkpoint and file both lost), every event keeps its (server_id, epoch, file, pos) identity,
and downstream deduplicates on it. A start first checks that the server's log still continues
where the last run stopped, and begins a new epoch when it does not (capture/binlog_epoch.py).

Memory stays within a bound whatever the size of a transaction: an open transaction's events
spill to a hidden file past ``buffer_bytes`` (capture/event_buffer.py), finished transactions
are published once they hold ``buffer_bytes`` in memory (or ``flush_txns`` of them wait), and
publishing streams the spilled lines into the landing file, which appears, whole, at the end.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from cdc_lakehouse.contract.landing import BINLOG, SESSIONS, source_dir, to_json
from cdc_lakehouse.contract.publication import remove_orphans, write_file

from . import binlog_epoch
from . import state as state_file
from .binlog_epoch import LandedGtids, Mark, continue_or_restart
from .binlog_events import STREAM_EVENTS, Assembler, Position, Transaction
from .event_buffer import DEFAULT_BUFFER_BYTES, EventBuffer
from .ddl_mariadb import MARKER_TABLE
from .sqlquote import CAPTURE_SCHEMA, my_ident

log = logging.getLogger(__name__)
# <binlog file>-<first pos>-<resume pos>.jsonl, prefixed by epoch<n>- from epoch 1 on
_LANDED = re.compile(r"^(?:epoch(?P<epoch>\d+)-)?(?P<file>.+)-(?P<first>\d{12})-(?P<end>\d{12})\.jsonl$")
DEFAULT_FLUSH_TXNS = 500
HEARTBEAT_S = 2


@dataclass
class BinlogConfig:
    host: str
    landing: Path
    source: str
    port: int = 3306
    user: str = "root"
    password: str = ""
    reader_server_id: int = 4242  # this reader's id as a replica: unique among the server's replicas
    state_dir: Path | None = None
    capture_schema: str = CAPTURE_SCHEMA
    follow: bool = False  # keep waiting for new events (else stop at the end of the binlog)
    start: str = "earliest"  # without a checkpoint: "earliest" binlog or "current" position
    flush_txns: int = DEFAULT_FLUSH_TXNS
    buffer_bytes: int = DEFAULT_BUFFER_BYTES  # events held in memory; a larger transaction spills to disk
    prune_markers: bool = True  # delete session-marker rows once their transactions landed

    @property
    def source_root(self) -> Path:
        return source_dir(self.landing, self.source)

    @property
    def checkpoint_path(self) -> Path:
        base = Path(self.state_dir) if self.state_dir else state_file.default_state_dir(self.source_root)
        return base / "binlog.json"

    def connection(self) -> dict:
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password,
                "charset": "utf8mb4"}


@dataclass
class CaptureResult:
    transactions: int = 0
    events: int = 0
    sessions: int = 0
    files: list[Path] = field(default_factory=list)
    position: Position | None = None
    spilled_transactions: int = 0  # held on disk while open: larger than the buffer
    skipped_transactions: int = 0  # replayed by a new server, landed already (binlog_epoch.py)
    new_epoch: str | None = None  # why this run began a new epoch, if it did


def landed_position(binlog_dir: Path) -> Position | None:
    """The resume position recorded in the names of the landing files already published."""
    files = _landed_files(binlog_dir)
    return files[-1][0] if files else None


def _landed_files(binlog_dir: Path) -> list[tuple[Position, Path]]:
    """This capture's landing files (by name), each with the resume position its name records."""
    found = []
    if binlog_dir.is_dir():
        for p in binlog_dir.iterdir():
            m = _LANDED.match(p.name)
            if m:
                found.append((Position.of(m.group("file"), int(m.group("end")), int(m.group("epoch") or 0)), p))
    return sorted(found, key=lambda f: f[0])


def landed_state(binlog_dir: Path) -> dict:
    """A checkpoint rebuilt from the landing files, for a start without its state folder (lost,
    or not moved with the capture to a new primary): the epoch and resume position of the last
    file, the server of its last line, and the highest GTIDs landed. Without it such a start
    would write epoch 0 on a new server, whose positions start again and would sort before the
    old server's. The mark is not in the lines: the same server resumes unchecked, as before
    marks; another server begins the next epoch. Reads every landed line once, only on such a start."""
    files = _landed_files(binlog_dir)
    if not files:
        return {}
    gtids = LandedGtids()
    last: dict = {}
    for _, path in files:
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    last = json.loads(line)
                    gtids.add(last.get("gtid"))
    end = files[-1][0]
    return {"file": end.file, "pos": end.pos, "epoch": end.epoch, "server_id": last.get("server_id"),
            "gtids": gtids.highest}


def resume_position(cfg: BinlogConfig) -> Position | None:
    saved = state_file.load(cfg.checkpoint_path)
    candidates = [landed_position(cfg.source_root / BINLOG)]
    if saved.get("file"):
        candidates.append(Position.of(saved["file"], saved["pos"], saved.get("epoch", 0)))
    candidates = [c for c in candidates if c is not None]
    return max(candidates) if candidates else None


class RowLoggingRequired(ValueError):
    """The server logs changes as SQL statements, or row images without every column: the rows a
    statement changed, or the columns an update left alone, would be missing from the capture."""

    def __init__(self, binlog_format: str, row_image: str):
        super().__init__(
            f"binlog capture needs binlog_format=ROW and binlog_row_image=FULL; the server has "
            f"binlog_format={binlog_format} and binlog_row_image={row_image} (SET GLOBAL binlog_format = 'ROW', "
            "binlog_row_image = 'FULL', and in the server's configuration file)")


def check_row_logging(conn) -> None:
    """Refuse to capture from a server that does not log full row images (CONTRACT §2.1)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.binlog_format, @@GLOBAL.binlog_row_image")
        binlog_format, row_image = (str(v).upper() for v in cur.fetchone())
    if (binlog_format, row_image) != ("ROW", "FULL"):
        raise RowLoggingRequired(binlog_format, row_image)


class BinlogOff(LookupError):
    """The server keeps no binary log: there is nothing to capture."""

    def __init__(self):
        super().__init__("binary logging is off on the server (log_bin)")


def server_start_position(conn, start: str, epoch: int = 0) -> Position:
    """The server's ``current`` position, or the beginning of its ``earliest`` binlog."""
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS" if start == "current" else "SHOW BINARY LOGS")
        row = cur.fetchone()
    if not row:
        raise BinlogOff()
    return Position.of(row[0], row[1] if start == "current" else 4, epoch)


class BinlogCapture:
    def __init__(self, cfg: BinlogConfig):
        self.cfg = cfg
        self.result = CaptureResult()

    def run(self) -> CaptureResult:
        import pymysql

        from .introspect import DefaultRoles

        conn = pymysql.connect(**self.cfg.connection(), autocommit=True)
        try:
            check_row_logging(conn)
            spill = self.cfg.source_root / BINLOG
            self.assembler = Assembler(self.cfg.capture_schema, DefaultRoles(conn),
                                       lambda: EventBuffer(spill, self.cfg.buffer_bytes))
            for kind in (BINLOG, SESSIONS):
                remove_orphans(self.cfg.source_root / kind)
            return self._run(self._start(conn))
        finally:
            conn.close()

    def _start(self, conn) -> Position:
        """Where the last run stopped; or, when the server's log started again since, the
        beginning of its first binlog in a new epoch (binlog_epoch.py), checkpointed at once."""
        saved = state_file.load(self.cfg.checkpoint_path)
        # without a checkpoint, cfg.start says where a new epoch begins too (--start current)
        new_epoch_at = "earliest" if saved else self.cfg.start
        saved = saved or landed_state(self.cfg.source_root / BINLOG)
        begin = continue_or_restart(conn, saved)
        self.skip, self.landed_gtids = begin.skip, begin.landed
        self.server_id, self.mark = begin.server_id, Mark.from_dict(saved.get("mark"))
        if begin.reason is None:
            start = resume_position(self.cfg) or server_start_position(conn, self.cfg.start)
        else:
            start = server_start_position(conn, new_epoch_at, begin.epoch)
            self.mark, self.result.new_epoch = None, begin.reason
            self._checkpoint(start)
        self.assembler.epoch = start.epoch
        self.result.position = start
        return start

    def _run(self, start: Position) -> CaptureResult:
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import HeartbeatLogEvent

        log.info("binlog capture of %s starts at %s:%d (epoch %d)", self.cfg.source, start.file, start.pos, start.epoch)
        stream = BinLogStreamReader(
            connection_settings=self.cfg.connection(), server_id=self.cfg.reader_server_id,
            log_file=start.file, log_pos=start.pos, resume_stream=True, blocking=self.cfg.follow,
            only_events=STREAM_EVENTS + ([HeartbeatLogEvent] if self.cfg.follow else []),
            slave_heartbeat=HEARTBEAT_S if self.cfg.follow else None, enable_logging=False)
        pending: list[Transaction] = []
        try:
            for ev in stream:
                if isinstance(ev, HeartbeatLogEvent):
                    self._flush(pending)
                    continue
                txn = self._landing(self.assembler.feed(ev, stream.log_file))
                if txn is not None:
                    pending.append(txn)
                    if txn.body is not None and txn.body.spilled:
                        self.result.spilled_transactions += 1
                    held = sum(t.held_bytes for t in pending)
                    if len(pending) >= self.cfg.flush_txns or held >= self.cfg.buffer_bytes:
                        self._flush(pending)
        except KeyboardInterrupt:
            log.info("interrupted: writing what was read")
        finally:
            stream.close()
            self.assembler.abandon()
            self._flush(pending)
        return self.result

    def _landing(self, txn: Transaction | None) -> Transaction | None:
        """The transaction as it lands: emptied when a failover's new server replays one that
        landed already (its position still advances the checkpoint)."""
        if txn is None or not txn.head or not self.skip.landed(txn.head[0]["gtid"]):
            return txn
        self.result.skipped_transactions += 1
        txn.discard()
        return Transaction([], txn.end, marker_ids=txn.marker_ids)

    def _flush(self, pending: list[Transaction]) -> None:
        """Publish the finished transactions, one landing file per binlog file, then checkpoint."""
        if not pending:
            return
        groups: dict[str, list[Transaction]] = {}
        for txn in pending:
            groups.setdefault(txn.end.file, []).append(txn)
        for file, txns in groups.items():
            self._publish(file, txns)
        landed = [t for t in pending if t.head]
        for t in landed:
            self.landed_gtids.add(t.head[0]["gtid"])
        if landed:
            self.mark = self._mark(landed[-1]) or self.mark
        self._checkpoint(pending[-1].end)
        self.result.position = pending[-1].end
        if self.cfg.prune_markers:
            self._prune([i for t in pending for i in t.marker_ids])
        pending.clear()

    def _mark(self, txn: Transaction) -> Mark | None:
        import pymysql

        last = txn.tail or txn.head[-1]
        conn = pymysql.connect(**self.cfg.connection(), autocommit=True)
        try:
            return binlog_epoch.event_at(conn, last["file"], last["pos"])
        finally:
            conn.close()

    def _checkpoint(self, end: Position) -> None:
        state_file.save(self.cfg.checkpoint_path, {
            "file": end.file, "pos": end.pos, "epoch": end.epoch, "server_id": self.server_id,
            "mark": self.mark and self.mark.as_dict(), "gtids": self.landed_gtids.highest,
            "skip_gtids": self.skip.highest,
        })

    def _prune(self, marker_ids: list[int]) -> None:
        """Delete session-marker rows already landed (by id: no range or gap locks)."""
        if not marker_ids:
            return
        import pymysql

        try:
            conn = pymysql.connect(**self.cfg.connection(), autocommit=True)
            try:
                with conn.cursor() as cur:
                    cur.execute("SET SESSION innodb_lock_wait_timeout = 2")
                    # one exact key per statement: a list or range would also lock the next
                    # row, which may be a marker of a transaction still in flight
                    cur.executemany(f"DELETE FROM {my_ident(self.cfg.capture_schema)}."
                                    f"{my_ident(MARKER_TABLE)} WHERE id = %s", [(i,) for i in marker_ids])
            finally:
                conn.close()
        except pymysql.MySQLError as exc:  # housekeeping only: the capture itself succeeded
            log.warning("could not prune binlog session markers: %s", exc)

    def _publish(self, file: str, txns: list[Transaction]) -> None:
        landed = [t for t in txns if t.head]
        sessions = [s for t in landed for s in t.sessions]
        self.result.transactions += len(landed)
        if not landed:
            return
        epoch = txns[-1].end.epoch
        name = f"{f'epoch{epoch}-' if epoch else ''}{file}-{landed[0].first_pos:012d}-{txns[-1].end.pos:012d}.jsonl"
        if sessions:  # before the events: a transaction never lands before its session
            write_file(self.cfg.source_root / SESSIONS / name, [to_json(s) for s in sessions])
            self.result.sessions += len(sessions)
        lines = (line for t in landed for line in t.lines())  # streamed: a spilled body is read back
        self.result.files.append(write_file(self.cfg.source_root / BINLOG / name, lines))
        self.result.events += sum(len(t) for t in landed)
        for t in landed:
            t.discard()


def capture(cfg: BinlogConfig) -> CaptureResult:
    return BinlogCapture(cfg).run()
