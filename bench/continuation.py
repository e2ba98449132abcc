"""New binlog transactions that continue a generated workload's log (``bench/incremental.py``).

The history is a binlog-only workload of ``bench.workload`` generated without an open tail (a
real binlog holds no uncommitted transaction followed by others). A ``Continuation`` rebuilds the
simulated source from the history's committed state (``expected/bench/app.<table>.jsonl``) and
runs the same transaction kinds on it (orders, status changes, telemetry, sign-ups, cancellations,
key changes, rollbacks ...), written by the same ``BinlogWriter`` into new files that follow the
history's: a higher binlog file number, GTID and XID, commit times after the history's. Each call
of ``land`` writes a fresh set of files; ``write_expected`` writes the source state they lead to,
for ``bench/verify.py``.

New keys take the next number after the largest in the state; a key the history deleted may come
back (an insert after a delete: valid CDC, the replica shows the row again).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from cdc_lakehouse.contract.lines import binlog_file_name

from bench.workload import (
    BINLOG_SOURCE, MIX, SCHEDULER_THREAD, SCHEMA, USER_OF_KIND, USERS, BinlogWriter, Source, Txn, WorkloadOptions,
)

_FIELDS = re.compile(rb'"file":"mysql-bin\.(\d+)".*?"ts":(-?\d+),"gtid":(?:"\d+-\d+-(\d+)"|null)'
                     rb',"type":"\w+","xid":(\d+|null)')


@dataclass
class LogEnd:
    """Where the binlog so far ends: the last file number, GTID sequence, XID and event time."""
    file_no: int = 0
    gtid: int = 1000
    xid: int = 50_000
    ts: int = 0

    @classmethod
    def scan(cls, landing: Path) -> "LogEnd":
        """Read every binlog file under ``landing`` (a regular expression per line: fast)."""
        end = cls()
        for path in (Path(landing) / BINLOG_SOURCE / "binlog").glob("*.jsonl"):
            for m in _FIELDS.finditer(path.read_bytes()):
                file_no, ts, gtid, xid = m.groups()
                end.file_no, end.ts = max(end.file_no, int(file_no)), max(end.ts, int(ts))
                if gtid:
                    end.gtid = max(end.gtid, int(gtid))
                if xid != b"null":
                    end.xid = max(end.xid, int(xid))
        return end


def load_state(db: Source, history: Path, tables: tuple[str, ...]) -> None:
    """Fill ``db`` with the history's committed rows and set its next ids past the largest."""
    for name in tables:
        table = db.tables[name]
        path = Path(history) / "expected" / BINLOG_SOURCE / f"{SCHEMA}.{name}.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            table._put(table.key_of(row), row)
    accounts, orders, devices = (db.tables[t].rows for t in ("accounts", "orders", "devices"))
    db.next_account = 1 + max((k[0] for k in accounts), default=0)
    db.next_order = 1 + max((k[0] for k in orders), default=0)
    db.next_device = 1 + max((int(k[0].removeprefix("dev-")) for k in devices), default=0)
    for order_id, line_no in db.tables["order_lines"].rows:
        db.lines_of.setdefault(order_id, []).append(line_no)


class Continuation:
    """Lands new binlog transactions after a history's log, in its landing folder."""

    def __init__(self, history: Path, landing: Path, tables: tuple[str, ...], seed: int, events_per_file: int = 50_000):
        self.landing = Path(landing)
        self.tables = tuple(tables)
        self.events_per_file = events_per_file
        self.db = Source(WorkloadOptions(seed=seed, forms=("binlog",), tables=self.tables).resolved())
        load_state(self.db, history, self.tables)
        self.end = LogEnd.scan(self.landing)
        self.now_us = (self.end.ts + 60) * 1_000_000  # a minute after the history's last event

    def land(self, row_changes: int) -> dict:
        """Write transactions of about ``row_changes`` row changes (at least that many) in new files."""
        writer = BinlogWriter(self.landing, self.events_per_file, first_file=self.end.file_no + 1,
                              gtid=self.end.gtid, xid=self.end.xid)
        first = writer.n_file
        done = {"row_changes": 0, "transactions": 0, "committed": 0, "rolled_back": 0}
        while done["row_changes"] < row_changes:
            tx, user = self._transaction()
            outcome = self._write(writer, tx, user)
            done["row_changes"] += len(tx.ops)
            done["transactions"] += 1
            done["committed" if outcome == "commit" else "rolled_back"] += 1
        writer.close()
        self.end = LogEnd(writer.n_file, writer.gtid, writer.xid, self.now_us // 1_000_000)
        done["files"] = [f"{binlog_file_name(n)}.jsonl" for n in range(first, writer.n_file + 1)]
        return done

    def _transaction(self) -> tuple[Txn, str]:
        """One transaction of the workload's mix (no initial loads, no bulk updates), with work."""
        rng = self.db.rng
        for _ in range(1000):
            self.now_us += rng.randint(1_000, 150_000)
            kind = rng.choices([k for k, _ in MIX], [w for _, w in MIX])[0]
            user = USER_OF_KIND.get(kind, rng.choice(["api", "api2"]))
            tx = Txn(self.db, user, self.now_us)
            if getattr(self.db, f"k_{kind}")(tx, self.now_us // 1_000_000) and tx.ops:
                return tx, user
            tx.rollback()
        raise ValueError(f"no transaction kind of the workload has work on the tables {self.tables}")

    def _write(self, writer: BinlogWriter, tx: Txn, user: str) -> str:
        rng = self.db.rng
        begin_us = tx.ops[0].t_us - rng.randint(100, 3000)
        end_us = tx.ops[-1].t_us + rng.randint(100, 3000)
        outcome = "rollback" if rng.random() < self.db.o.rollback_rate else "commit"
        if outcome == "rollback":
            tx.rollback()
        thread_id = SCHEDULER_THREAD if user == "scheduler" else USERS[user][1]
        writer.write(tx, outcome, begin_us // 1_000_000, end_us // 1_000_000, thread_id,
                     with_gtid=rng.random() > 0.01, with_xid=rng.random() > 0.01)
        self.now_us = end_us
        return outcome

    def write_expected(self, out: Path) -> Path:
        """The source state now, as ``<out>/expected/bench/app.<table>.jsonl`` (``bench/verify.py``)."""
        folder = Path(out) / "expected" / BINLOG_SOURCE
        folder.mkdir(parents=True, exist_ok=True)
        for name in self.tables:
            rows = self.db.tables[name].rows
            text = "".join(json.dumps(rows[k], ensure_ascii=False) + "\n" for k in sorted(rows))
            (folder / f"{SCHEMA}.{name}.jsonl").write_text(text, encoding="utf-8")
        return Path(out)
