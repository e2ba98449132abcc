"""What happened to each snapshot, kept next to its corrections in the landing folder.

```
<landing>/<source>/corrections/<schema>.<table>/<snapshot_id>.jsonl          the corrective changes
<landing>/<source>/corrections/<schema>.<table>/_<snapshot_id>.status.json   reconciled | quarantined | skipped
<landing>/<source>/_archive/corrections/<schema>.<table>/<snapshot_id>.jsonl after housekeeping archived it
```

The corrections file *is* the record that a snapshot was reconciled: it is published atomically
(written under a hidden name, fsynced, renamed), never rewritten, and a snapshot that has one is
never compared again, so reconcile is idempotent. Status files start with ``_`` so that neither
Auto Loader nor the local file source ever reads them as data; they carry the counts, the
sequence used, and for a quarantined snapshot the reason.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from cdc_lakehouse.contract.publication import write_atomically
from cdc_lakehouse.contract.corrections import CORRECTIONS

ARCHIVE = "_archive"
RECONCILED, QUARANTINED, SKIPPED = "reconciled", "quarantined", "skipped"


def corrections_root(landing: str | Path, source: str) -> Path:
    return Path(landing) / source / CORRECTIONS


class Ledger:
    def __init__(self, landing: str | Path, source: str):
        self.source = source
        self.root = corrections_root(landing, source)
        self.archive_root = Path(landing) / source / ARCHIVE / CORRECTIONS

    def corrections_file(self, table: str, snapshot_id: str) -> Path:
        return self.root / table / f"{snapshot_id}.jsonl"

    def status_file(self, table: str, snapshot_id: str) -> Path:
        return self.root / table / f"_{snapshot_id}.status.json"

    def reconciled(self, table: str, snapshot_id: str) -> bool:
        name = f"{snapshot_id}.jsonl"
        return (self.root / table / name).exists() or (self.archive_root / table / name).exists()

    def status(self, table: str, snapshot_id: str) -> dict | None:
        """The snapshot's record: None when it was never handled."""
        path = self.status_file(table, snapshot_id)
        recorded = json.loads(path.read_text()) if path.exists() else None
        if self.reconciled(table, snapshot_id):
            # A crash after publishing the corrections but before the status leaves no status:
            # the corrections file alone says "reconciled".
            return recorded if recorded and recorded["status"] == RECONCILED else {"status": RECONCILED}
        return recorded

    def records(self, table: str) -> list[dict]:
        folder = self.root / table
        if not folder.is_dir():
            return []
        return [json.loads(p.read_text()) for p in sorted(folder.glob("_*.status.json"))]

    def write_status(self, table: str, snapshot_id: str, status: str, **details) -> dict:
        record = {"snapshot_id": snapshot_id, "table": table, "source": self.source, "status": status,
                  "recorded_at": _now(), **details}
        write_atomically(self.status_file(table, snapshot_id), json.dumps(record, indent=1, default=str))
        return record


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
