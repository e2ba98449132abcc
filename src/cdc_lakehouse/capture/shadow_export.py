"""Shadow export: committed shadow and transaction rows -> landing files (CONTRACT §2.3, §2.4).

One batch is exported exactly once, even across crashes, by a small journal:

1. read committed rows (:mod:`shadow_readers`), write them to durable temporary files;
2. journal the batch (its temporary and final file names and the row ids to purge);
3. rename the files to their final names (and fsync the folders);
4. purge the exported rows from the source, in one transaction;
5. clear the journal.

A run first finishes a journaled batch (steps 3-5; each is idempotent) and deletes temporary
files no journal names. Rows are purged only after their file is durable under its final name,
and rows not yet purged are exported only by the batch that journaled them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import state as state_file
from .landing import publish, remove_orphans, source_dir, table_folder, to_json, write_temp
from .shadow_readers import Batch

DEFAULT_BATCH_ROWS = 50_000
TXN_FOLDER = "_transactions"


@dataclass
class ExportResult:
    batches: int = 0
    txn_rows: int = 0
    change_rows: int = 0
    files: list[Path] | None = None


class ShadowExporter:
    def __init__(self, reader, landing: Path | str, source: str, state_dir: Path | None = None,
                 batch_rows: int = DEFAULT_BATCH_ROWS):
        self.reader = reader
        self.shadow_root = source_dir(landing, source) / "shadow"
        self.state_path = (Path(state_dir) if state_dir else
                           state_file.default_state_dir(source_dir(landing, source))) / "shadow-export.json"
        self.batch_rows = batch_rows

    def run(self) -> ExportResult:
        result = ExportResult(files=[])
        self._recover()
        while True:
            batch = self.reader.read(self.batch_rows)
            if batch.empty:
                return result
            result.files += self._export(batch)
            result.batches += 1
            result.txn_rows += len(batch.txns)
            result.change_rows += sum(len(rows) for rows in batch.changes.values())
            if not batch.full:
                return result

    def _export(self, batch: Batch) -> list[Path]:
        st = state_file.load(self.state_path)
        number = st.get("next_batch", 1)
        name = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S%f}-{number:06d}"
        files = self._write_temps(batch, name)
        st.update(next_batch=number + 1, pending={
            "files": [[str(t), str(f)] for t, f in files],
            "txn_ids": batch.txn_ids, "change_ids": batch.change_ids})
        state_file.save(self.state_path, st)
        self._finish(st)
        return [f for _, f in files]

    def _write_temps(self, batch: Batch, name: str) -> list[tuple[Path, Path]]:
        out = []
        if batch.txns:
            folder = self.shadow_root / TXN_FOLDER
            out.append((write_temp(folder, [to_json(r) for r in batch.txns]),
                        folder / f"txns-{name}.jsonl"))
        for table, rows in sorted(batch.changes.items(), key=lambda kv: kv[0].qualified):
            if rows:
                folder = self.shadow_root / table_folder(table.schema, table.table)
                out.append((write_temp(folder, [to_json(r) for r in rows]),
                            folder / f"changes-{name}.jsonl"))
        return out

    def _finish(self, st: dict) -> None:
        pending = st["pending"]
        for tmp, final in pending["files"]:
            if Path(tmp).exists():  # else it was renamed already: a temp only leaves by rename
                publish(Path(tmp), Path(final))
        self.reader.purge(pending["txn_ids"], pending["change_ids"])
        st["pending"] = None
        state_file.save(self.state_path, st)

    def _recover(self) -> None:
        st = state_file.load(self.state_path)
        if st.get("pending"):
            self._finish(st)
        if self.shadow_root.is_dir():
            for folder in self.shadow_root.iterdir():
                if folder.is_dir():
                    remove_orphans(folder)


def export_once(dsn: str, landing, source: str, state_dir=None,
                batch_rows: int = DEFAULT_BATCH_ROWS) -> ExportResult:
    """Connect, export everything committed so far, disconnect."""
    from .connect import MARIADB, connect, dialect_of
    from .shadow_readers import MariaDBShadowReader, PostgresShadowReader

    conn = connect(dsn)
    try:
        reader = (MariaDBShadowReader if dialect_of(dsn) == MARIADB else PostgresShadowReader)(conn)
        return ShadowExporter(reader, landing, source, state_dir, batch_rows).run()
    finally:
        conn.close()
