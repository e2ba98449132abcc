"""Whether a server's binlog still continues where the capture stopped, and the epoch if not.

Binlog positions start again after ``RESET MASTER``, a restore or a failover to another server:
``mysql-bin.000001`` at 4 comes back with other events. Resuming at a saved position would then
read the wrong events, and downstream would take reused positions for re-deliveries. So the
checkpoint keeps a *mark*, the end of the last transaction landed (its commit event, whose xid
the server never repeats while it runs; else its only event), and the server's id, and a start
checks that it reads the same server and that its log still holds that event there. When it does not,
the log has started again: the capture begins a new *epoch* (CONTRACT §2.1 extension,
docs/binlog-epochs.md) at the first binlog the server has, and every event of it carries the
epoch, which orders it after every event of earlier epochs.

After a failover the new server's binlog also holds the transactions it replicated from the old
one. Where they carry GTIDs the capture skips those it has already landed (per MariaDB domain
or MySQL server uuid, the highest sequence number landed); without GTIDs they land again
(applied again in order: replicas end right, the audit shows them twice).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .binlog_events import Position

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Mark:
    """The last event of the last transaction landed, as ``SHOW BINLOG EVENTS`` shows it."""

    file: str
    pos: int
    server_id: int
    event_type: str
    info: str

    def as_dict(self) -> dict:
        return {"file": self.file, "pos": self.pos, "server_id": self.server_id,
                "event_type": self.event_type, "info": self.info}

    @classmethod
    def from_dict(cls, d: dict | None) -> "Mark | None":
        return cls(**d) if d else None


def event_at(conn, file: str, pos: int) -> Mark | None:
    """The event the server's log has at (file, pos); None when the file is gone, or no event
    starts there."""
    import pymysql

    try:
        with conn.cursor() as cur:
            cur.execute(f"SHOW BINLOG EVENTS IN %s FROM {int(pos)} LIMIT 1", (file,))
            row = cur.fetchone()
    except pymysql.MySQLError:  # "could not find target log", "wrong offset"
        return None
    if not row or int(row[1]) != pos:
        return None
    return Mark(file, pos, int(row[3]), str(row[2]), str(row[5]))


def restart_reason(conn, mark: Mark | None) -> str | None:
    """Why the server's log no longer continues from the mark; None when it does (or there is
    no mark to check)."""
    if mark is None:
        return None
    found = event_at(conn, mark.file, mark.pos)
    if found is None and _purged(conn, mark.file):
        return None  # the log goes on; whether the resume point is still there, the server says
    if found is None:
        return f"the server has no event at {mark.file}:{mark.pos}, where the last transaction landed ended"
    if found != mark:
        return (f"the event at {mark.file}:{mark.pos} is now {found.event_type} '{found.info}' of server "
                f"{found.server_id}, not {mark.event_type} '{mark.info}' of server {mark.server_id}")
    return None


def _purged(conn, file: str) -> bool:
    """The file is older than every binlog the server keeps: purged by retention, not reset."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        first = cur.fetchone()
    return first is not None and Position.of(first[0], 4) > Position.of(file, 4)


def server_id(conn) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.server_id")
        return int(cur.fetchone()[0])


def _gtid_counter(gtid: str | None) -> tuple[str, int] | None:
    """(domain or server uuid, sequence number) of a MariaDB ``d-s-n`` or MySQL ``uuid:n`` GTID."""
    if not gtid:
        return None
    if ":" in gtid:
        source, _, n = gtid.rpartition(":")
        return (source.lower(), int(n)) if n.isdigit() else None
    parts = gtid.split("-")
    return (parts[0], int(parts[2])) if len(parts) == 3 and parts[2].isdigit() else None


@dataclass
class LandedGtids:
    """The highest GTID sequence number landed per MariaDB domain / MySQL server uuid."""

    highest: dict[str, int] = field(default_factory=dict)

    def landed(self, gtid: str | None) -> bool:
        counter = _gtid_counter(gtid)
        return counter is not None and counter[1] <= self.highest.get(counter[0], -1)

    def add(self, gtid: str | None) -> None:
        counter = _gtid_counter(gtid)
        if counter is not None:
            self.highest[counter[0]] = max(counter[1], self.highest.get(counter[0], -1))


@dataclass
class EpochStart:
    """How a capture starts: in which epoch, skipping which GTIDs (landed before a failover),
    and why a new epoch began (None when it continues the saved one)."""

    epoch: int
    server_id: int  # of the server read now
    skip: LandedGtids
    landed: LandedGtids  # what the checkpoint goes on counting from
    reason: str | None = None


def continue_or_restart(conn, saved: dict) -> EpochStart:
    """Continue the saved epoch, or begin the next one when the server's log started again.
    Only across a change of server are landed GTIDs skipped (a failover replays the old
    server's transactions); after a reset on the same server GTIDs start again too, and in a
    continuing log they only grow."""
    epoch = int(saved.get("epoch", 0))
    now_id = server_id(conn)
    same_server = saved.get("server_id") in (None, now_id)
    reason = restart_reason(conn, Mark.from_dict(saved.get("mark")))
    if not same_server:
        reason = f"another server: server_id {saved['server_id']}, now {now_id}"
    landed = LandedGtids(dict(saved.get("gtids", {})))
    if reason is None:
        return EpochStart(epoch, now_id, LandedGtids(dict(saved.get("skip_gtids", {}))), landed)
    log.warning("binlog positions started again (%s): capture begins epoch %d at the server's first binlog",
                reason, epoch + 1)
    if same_server:
        return EpochStart(epoch + 1, now_id, LandedGtids(), LandedGtids(), reason)
    return EpochStart(epoch + 1, now_id, landed, LandedGtids(dict(landed.highest)), reason)
