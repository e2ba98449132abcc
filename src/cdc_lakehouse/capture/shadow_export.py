"""Shadow export: committed shadow and transaction rows -> landing files (CONTRACT §2.3, §2.4).

One batch is exported exactly once, even across crashes, by a small journal:

1. read committed rows not in the ledger (:mod:`shadow_readers`), write durable temporary files;
2. journal the batch (its temporary and final file names and its ledger record);
3. rename the files to their final names (and fsync the folders);
4. write the batch's ledger record (:mod:`shadow_ledger`: exported, not purged yet), have the
   reader forget the dropped tables whose drop the batch landed, clear the journal.

A run first finishes a journaled batch (steps 3-4; each is idempotent) and deletes temporary
files no journal names. Rows stay in the source after export; later reads skip what the
ledger names. When they are purged depends on ``purge``:

* ``"ack"`` (default): at the end of a run, the rows of transactions the lakehouse acknowledged
  (``<landing>/<source>/_ack.json``, ``end_ts <= watermark_end_ts``); without an ack, none.
* ``"on_landing"``: after each batch, everything in the ledger (for deployments without
  housekeeping: the landing file is then the only copy).

A purge deletes the rows in one transaction, then forgets them in the ledger; repeated after a
crash it deletes nothing more, and rows are skipped by reads until they are forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from cdc_lakehouse.contract.landing import TRANSACTIONS, shadow_dir, source_dir, table_folder, to_json
from cdc_lakehouse.contract.publication import publish, remove_orphans, write_temp

from . import state as state_file
from .shadow_ledger import LEDGER_FOLDER, Ledger, read_ack, record_of
from .shadow_readers import Batch
from .sqlquote import TableName

DEFAULT_BATCH_ROWS = 50_000
TXN_FOLDER = TRANSACTIONS
PURGE_MODES = ("ack", "on_landing")


@dataclass
class ExportResult:
    batches: int = 0
    txn_rows: int = 0
    change_rows: int = 0
    files: list[Path] | None = None
    purged_txns: int = 0
    purged_change_rows: int = 0


class ShadowExporter:
    def __init__(self, reader, landing: Path | str, source: str, state_dir: Path | None = None,
                 batch_rows: int = DEFAULT_BATCH_ROWS, purge: str = "ack"):
        if purge not in PURGE_MODES:
            raise ValueError(f"purge must be one of {PURGE_MODES}, got {purge!r}")
        self.reader, self.landing, self.source, self.purge = reader, landing, source, purge
        self.shadow_root = shadow_dir(landing, source)
        state_dir = Path(state_dir) if state_dir else state_file.default_state_dir(source_dir(landing, source))
        self.state_path = state_dir / "shadow-export.json"
        self.ledger = Ledger(state_dir / LEDGER_FOLDER)
        self.batch_rows = batch_rows

    def run(self) -> ExportResult:
        result = ExportResult(files=[])
        self.recover(result)
        while True:
            batch = self.reader.read(self.batch_rows, self.ledger.skip_txns(), self.ledger.skip_ids())
            if batch.empty:
                break
            result.files += self.journal(batch)
            self.finish(result)
            result.batches += 1
            result.txn_rows += len(batch.txns)
            result.change_rows += sum(len(rows) for rows in batch.changes.values())
            if not batch.full:
                break
        if self.purge == "ack":
            # Only here, once the reads are drained: every transaction whose row was exported
            # has all its change rows exported too, so none can be left behind unrecorded.
            self.purge_rows(result, read_ack(self.landing, self.source))
        return result

    def journal(self, batch: Batch) -> list[Path]:
        """Steps 1-2: temporary files and the journal. Returns the final file names."""
        st = state_file.load(self.state_path)
        number = st.get("next_batch", 1)
        name = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S%f}-{number:06d}"
        files = self._write_temps(batch, name)
        st.update(next_batch=number + 1, pending={
            "files": [[str(t), str(f)] for t, f in files], "record": record_of(batch, number),
            "dropped": [[t.schema, t.table] for t in batch.dropped]})
        state_file.save(self.state_path, st)
        return [f for _, f in files]

    def _write_temps(self, batch: Batch, name: str) -> list[tuple[Path, Path]]:
        """The files in the order they are published: the transaction rows last, so a pipeline
        update between two renames holds change rows rather than see a transaction without them."""
        out = []
        for table, rows in sorted(batch.changes.items(), key=lambda kv: kv[0].qualified):
            if rows:
                folder = self.shadow_root / table_folder(table.schema, table.table)
                out.append((write_temp(folder, [to_json(r) for r in rows]),
                            folder / f"changes-{name}.jsonl"))
        if batch.txns:
            folder = self.shadow_root / TXN_FOLDER
            out.append((write_temp(folder, [to_json(r) for r in batch.txns]),
                        folder / f"txns-{name}.jsonl"))
        return out

    def finish(self, result: ExportResult) -> None:
        """Steps 3-4 for the journaled batch, if any (then the on_landing purge)."""
        st = state_file.load(self.state_path)
        pending = st.get("pending")
        if pending:
            for tmp, final in pending["files"]:
                if Path(tmp).exists():  # else it was renamed already: a temp only leaves by rename
                    publish(Path(tmp), Path(final))
            if "record" in pending:
                self.ledger.add(pending["record"])
                # Only once its drop is published; after a crash, recovery does it (idempotent).
                self.reader.forget_tables([TableName(*t) for t in pending.get("dropped", [])])
            else:  # journaled by a version that purged at once: finish it the way it would have
                self.reader.purge(pending["txn_ids"], pending["change_ids"])
            st["pending"] = None
            state_file.save(self.state_path, st)
        if self.purge == "on_landing":
            self.purge_rows(result, None)

    def purge_rows(self, result: ExportResult, watermark: datetime | None) -> None:
        """Purge exported rows: of transactions ending at or before ``watermark`` (ack), or all
        of them (on_landing). No watermark in ack mode: nothing is acknowledged, nothing goes."""
        if self.purge == "ack":
            txns = self.ledger.covered(watermark) if watermark else set()
        else:
            txns = self.ledger.txns()
        if not txns:
            return
        txn_rows, change_ids = self.ledger.rows_of(txns)
        self.reader.purge(txn_rows, change_ids)
        self.ledger.forget(txns)  # only now: until then, reads go on skipping these rows
        result.purged_txns += len(txns)
        result.purged_change_rows += sum(len(ids) for ids in change_ids.values())

    def recover(self, result: ExportResult) -> None:
        self.finish(result)
        if self.shadow_root.is_dir():
            for folder in self.shadow_root.iterdir():
                if folder.is_dir():
                    remove_orphans(folder)


def export_once(dsn: str, landing, source: str, state_dir=None,
                batch_rows: int = DEFAULT_BATCH_ROWS, purge: str = "ack") -> ExportResult:
    """Connect, export everything committed so far, purge what ``purge`` allows, disconnect."""
    from .connect import MARIADB, connect, dialect_of
    from .shadow_readers import MariaDBShadowReader, PostgresShadowReader

    conn = connect(dsn)
    try:
        reader = (MariaDBShadowReader if dialect_of(dsn) == MARIADB else PostgresShadowReader)(conn)
        return ShadowExporter(reader, landing, source, state_dir, batch_rows, purge).run()
    finally:
        conn.close()
