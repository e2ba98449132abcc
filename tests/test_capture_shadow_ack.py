"""Shadow export purging by the lakehouse's acknowledgement, on live PostgreSQL and MariaDB.

Exported rows stay in the source, are never exported again, and leave only once
``<landing>/<source>/_ack.json`` covers their transaction (``end_ts <= watermark_end_ts``);
crashes are left on disk half-way, as a killed process leaves them, and a later run recovers.
The last test lets the real pipeline and housekeeping write the acknowledgement.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml
from live import fixtures
from test_capture_shadow import Dialect, _landed

from cdc_lakehouse.capture.cli import add_capture_commands
from cdc_lakehouse.contract.publication import publish
from cdc_lakehouse.capture.shadow_export import ShadowExporter, export_once
from cdc_lakehouse.capture.shadow_ledger import LEDGER_FOLDER, Ledger, parse_ts
from cdc_lakehouse.capture.state import STATE_FOLDER
from cdc_lakehouse.housekeeping.ack import write_ack


@pytest.fixture(scope="module", params=["postgres", "mariadb"])
def dialect(request):
    server = fixtures.postgres() if request.param == "postgres" else fixtures.mariadb()
    return Dialect(request.param, server)


# Servers a test of this module installed capture on (a server without it has nothing to export).
_CAPTURED: dict[str, object] = {}


@pytest.fixture(autouse=True)
def leave_no_rows(tmp_path):
    """Rows a test leaves for an ack would land in later tests' folders (the servers are
    shared, and their exports keep ledgers of their own): export and purge them here."""
    yield
    for server in _CAPTURED.values():
        export_once(server.dsn, tmp_path / "cleanup", "cleanup", purge="on_landing")


class Source:
    """A captured table ``<unique schema>.items`` and what is left of it in the shadow tables."""

    def __init__(self, dialect: Dialect, prefix: str, scratch: Path):
        self.d = dialect
        self.table = dialect.create(fixtures.unique_schema(prefix))
        _CAPTURED[dialect.name] = dialect.server
        self.src = f"{dialect.q(self.table.schema)}.items"
        self.conn = dialect.session()
        # Servers are shared: other tests' rows (also rows they exported and left for an ack)
        # go first, so that everything this test's exports see is its own.
        export_once(dialect.server.dsn, scratch / "warmup", "warmup", purge="on_landing")

    def txn(self, *statements):
        self.d.run(self.conn, "BEGIN", *statements, "COMMIT")

    def remaining(self) -> list[tuple[int, str]]:
        """(key id, op) of this table's change rows still in its shadow table."""
        key = "key::text" if self.d.name == "postgres" else "`key`"
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT {key}, op FROM {self.d.q('cdc_capture')}.{self.d.q(self.table.shadow)}")
            return sorted((json.loads(k)["id"], op) for k, op in cur.fetchall())

    def txn_rows(self) -> set[str]:
        """PostgreSQL: ids in the transaction table (MariaDB has none of its own)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT txn_id::text FROM cdc_capture._transactions")
            return {r[0] for r in cur.fetchall()}

    def landed(self, landing: Path, source: str = "s"):
        """(key id, op) of every landed change, and per key id its transaction and end_ts."""
        txns, changes = _landed(landing / source, self.table)
        end = {t["txn_id"]: t["end_ts"] for t in txns}
        by_key = {c["key"]["id"]: (c["txn_id"], end.get(c["txn_id"])) for c in changes}
        return sorted((c["key"]["id"], c["op"]) for c in changes), by_key


def ack(landing: Path, source: str, watermark: str) -> None:
    """An acknowledgement as housekeeping writes it (docs/snapshots.md), through its writer."""
    write_ack(landing, {"source": source, "capture": "shadow",
                        "applied_through": {"end_ts": watermark, "txn_id": "-", "position": 0},
                        "watermark_end_ts": watermark, "held_transactions": 0, "written_at": watermark})


def test_rows_stay_until_an_ack_covers_exactly_their_transactions(dialect, tmp_path):
    s = Source(dialect, "ack", tmp_path)
    s.txn(f"INSERT INTO {s.src} VALUES (1, 'a')")
    s.txn(f"INSERT INTO {s.src} VALUES (2, 'b')", f"UPDATE {s.src} SET v = 'b2' WHERE id = 2")
    s.txn(f"INSERT INTO {s.src} VALUES (3, 'c')")
    first = export_once(dialect.server.dsn, tmp_path, "s")
    everything = [(1, "I"), (2, "I"), (2, "U"), (3, "I")]
    assert first.files and first.purged_txns == 0
    assert s.remaining() == everything, "no ack yet: nothing is purged"

    again = export_once(dialect.server.dsn, tmp_path, "s")
    assert (again.batches, again.files, again.purged_txns) == (0, [], 0), "exported rows are not read again"
    changes, by_key = s.landed(tmp_path)
    assert changes == everything
    (t1, _), (t2, end2), (t3, end3) = by_key[1], by_key[2], by_key[3]
    assert parse_ts(end2) < parse_ts(end3)

    ack(tmp_path, "s", end2)
    covered = export_once(dialect.server.dsn, tmp_path, "s")
    assert (covered.files, covered.purged_txns, covered.purged_change_rows) == ([], 2, 3)
    assert s.remaining() == [(3, "I")], "exactly the transactions ending at or before the watermark"
    if dialect.name == "postgres":
        assert {t1, t2, t3} & s.txn_rows() == {t3}

    ack(tmp_path, "s", end3)
    export_once(dialect.server.dsn, tmp_path, "s")
    assert s.remaining() == []
    if dialect.name == "postgres":
        assert not {t1, t2, t3} & s.txn_rows()
    assert s.landed(tmp_path)[0] == everything, "every change landed once"
    assert not list((tmp_path / "s" / STATE_FOLDER / LEDGER_FOLDER).glob("*.json")), "ledger emptied"


def test_a_late_commit_with_lower_ids_is_exported_and_purged_by_its_own_end_ts(dialect, tmp_path):
    """Ids are taken at INSERT: the late transaction's rows lie below rows already exported."""
    s = Source(dialect, "late", tmp_path)
    early = dialect.session()
    dialect.run(early, "BEGIN", f"INSERT INTO {s.src} VALUES (1, 'early')")
    s.txn(f"INSERT INTO {s.src} VALUES (2, 'late')")
    export_once(dialect.server.dsn, tmp_path, "s")
    dialect.run(early, "COMMIT")
    early.close()
    second = export_once(dialect.server.dsn, tmp_path, "s")
    assert second.change_rows == 1
    changes, by_key = s.landed(tmp_path)
    assert changes == [(1, "I"), (2, "I")]
    assert parse_ts(by_key[1][1]) > parse_ts(by_key[2][1])

    ack(tmp_path, "s", by_key[2][1])  # the late-id transaction committed first: only it is covered
    export_once(dialect.server.dsn, tmp_path, "s")
    assert s.remaining() == [(1, "I")]

    # the old behaviour, also for rows an earlier run left for an ack: everything exported goes
    last = export_once(dialect.server.dsn, tmp_path, "s", purge="on_landing")
    assert (last.files, last.purged_txns) == ([], 1)
    assert s.remaining() == [] and s.landed(tmp_path)[0] == changes


def _journaled(exporter: ShadowExporter, reader) -> list:
    """Steps 1-2 done (temporary files, journal), then the process dies."""
    exporter.journal(reader.read(exporter.batch_rows, exporter.ledger.skip_txns(), exporter.ledger.skip_ids()))
    return json.loads(exporter.state_path.read_text())["pending"]["files"]


@pytest.mark.parametrize("crash", ["journaled", "published", "purged"])
def test_a_crash_at_any_step_loses_nothing_and_exports_nothing_twice(dialect, tmp_path, crash):
    s = Source(dialect, "crash", tmp_path)
    for i in (1, 2, 3):
        s.txn(f"INSERT INTO {s.src} VALUES ({i}, 'v')")
    reader = dialect.reader()
    if crash in ("journaled", "published"):
        files = _journaled(ShadowExporter(reader, tmp_path, "s"), reader)
        assert files and all(Path(tmp).exists() for tmp, _ in files)
        if crash == "published":  # step 3 done: files under their final names, not recorded
            for tmp, final in files:
                publish(Path(tmp), Path(final))
    else:  # exported and acknowledged; the purge deleted the rows but died before the ledger
        export_once(dialect.server.dsn, tmp_path, "s")
        watermark = max(end for _, end in s.landed(tmp_path)[1].values())
        ack(tmp_path, "s", watermark)
        ledger = Ledger(tmp_path / "s" / STATE_FOLDER / LEDGER_FOLDER)
        reader.purge(*ledger.rows_of(ledger.covered(parse_ts(watermark))))
        assert s.remaining() == [] and ledger.txns()
    reader.conn.close()

    s.txn(f"INSERT INTO {s.src} VALUES (4, 'v')")
    export_once(dialect.server.dsn, tmp_path, "s")
    changes, by_key = s.landed(tmp_path)
    assert changes == [(1, "I"), (2, "I"), (3, "I"), (4, "I")], "each change landed once"
    assert not [p for p in (tmp_path / "s").rglob("*") if p.name.startswith(".cdc-tmp-")]
    assert not json.loads((tmp_path / "s" / STATE_FOLDER / "shadow-export.json").read_text())["pending"]
    ledger = Ledger(tmp_path / "s" / STATE_FOLDER / LEDGER_FOLDER)
    if crash == "purged":
        assert s.remaining() == [(4, "I")]
        assert ledger.txns() == {by_key[4][0]}, "the purged transactions are forgotten"
    else:
        assert s.remaining() == changes, "no ack: recovered rows stay in the source"
        assert {txn for txn, _ in by_key.values()} <= ledger.txns()


def capture_cli(*argv) -> dict:
    parser = argparse.ArgumentParser(prog="cdc-lakehouse")
    add_capture_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["capture", "shadow-export", *argv])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert args.func(args) == 0
    return json.loads(out.getvalue())


def test_cli_purges_by_ack_by_default_or_on_landing(dialect, tmp_path):
    s = Source(dialect, "cli", tmp_path)
    s.txn(f"INSERT INTO {s.src} VALUES (1, 'a')")
    common = ["--dsn", dialect.server.dsn, "--landing", str(tmp_path), "--source", "s"]
    report = capture_cli(*common)
    assert (report["purge"], report["change_rows"], report["purged_txns"]) == ("ack", 1, 0)
    assert s.remaining() == [(1, "I")]
    ack(tmp_path, "s", s.landed(tmp_path)[1][1][1])
    report = capture_cli(*common)
    assert (report["change_rows"], report["purged_txns"], report["purged_change_rows"]) == (0, 1, 1)
    assert s.remaining() == []

    s.txn(f"INSERT INTO {s.src} VALUES (2, 'b')")
    report = capture_cli(*common, "--purge", "on_landing")
    assert (report["purge"], report["change_rows"], report["purged_change_rows"]) == ("on_landing", 1, 1)
    assert s.remaining() == []


# ------------------------------------------------------------------------------------------
# the acknowledgement written by housekeeping after a real pipeline update
# ------------------------------------------------------------------------------------------

INTERNAL = ["__op", "__sequence", "__commit_ts", "__txn_id"]


def items_flow(n: int, source: str, dialect: str, schema: str) -> dict:
    return {
        "data_flow_id": f"9{n:02d}", "data_flow_group": "ack",
        "source_system": "PostgreSQL" if dialect == "postgres" else "MariaDB",
        "source_format": "cloudFiles",
        "source_details": {"source_database": schema, "source_table": "items"},
        "bronze_database_dev": "bronze", "bronze_table": f"{source}_shadow_items",
        "bronze_reader_options": {"cloudFiles.format": "json", "cloudFiles.rescuedDataColumn": "_rescued_data"},
        "silver_database_dev": "silver", "silver_table": f"{source}_items",
        "silver_cdc_apply_changes": {"keys": ["id"], "sequence_by": "__sequence", "scd_type": "1",
                                     "apply_as_deletes": "__op = 'DELETE'", "except_column_list": INTERNAL},
        "cdc_lakehouse": {"capture": "shadow", "source": source},
    }


def test_the_ack_housekeeping_writes_after_an_update_drives_the_purge(spark, tmp_path):
    from test_snapshot_support import run

    from cdc_lakehouse.cli import main

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    dialects = [Dialect("postgres", fixtures.postgres()), Dialect("mariadb", fixtures.mariadb())]
    sources = {f"{d.name}_ack": Source(d, "hk", tmp_path) for d in dialects}
    onboarding = tmp_path / "onboarding.yml"
    onboarding.write_text(yaml.safe_dump([items_flow(n, name, s.d.name, s.table.schema)
                                          for n, (name, s) in enumerate(sources.items())]))
    for name, s in sources.items():
        s.txn(f"INSERT INTO {s.src} VALUES (1, 'a')")
        s.txn(f"INSERT INTO {s.src} VALUES (2, 'b')")
        export_once(s.d.server.dsn, landing, name)
    run(spark, landing, lake, onboarding)  # applies transactions 1 and 2
    for name, s in sources.items():
        s.txn(f"UPDATE {s.src} SET v = 'c' WHERE id = 1")  # lands after the update: not applied
        export_once(s.d.server.dsn, landing, name)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["housekeeping", "--lake", str(lake), "--config", str(onboarding), "--landing", str(landing),
                     "--skip", "compaction", "--skip", "tombstones", "--skip", "archive",
                     "--skip", "optimize", "--json"]) == 0
    for name, s in sources.items():
        changes, by_key = s.landed(landing, name)
        assert changes == [(1, "I"), (1, "U"), (2, "I")]
        assert json.loads((landing / name / "_ack.json").read_text())["watermark_end_ts"] == by_key[2][1]
        assert s.remaining() == changes, f"{name}: acknowledged, not purged before the next export"
        result = export_once(s.d.server.dsn, landing, name)
        assert (result.files, result.purged_txns) == ([], 2)
        assert s.remaining() == [(1, "U")], f"{name}: the applied transactions are purged, the later one stays"
