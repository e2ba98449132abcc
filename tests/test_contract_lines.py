"""The landing line shapes (contract/lines.py) and the streaming landing writer (contract/writer.py)."""

from __future__ import annotations

import json
from pathlib import Path

from cdc_lakehouse.contract.landing import numbered_file
from cdc_lakehouse.contract.lines import BINLOG_FIELDS, binlog_event, change_row_of, iso_s, iso_us
from cdc_lakehouse.contract.publication import TMP_PREFIX
from cdc_lakehouse.contract.writer import FileSeries, LandingFile

KEYS = ("order_id", "line_no")


def test_binlog_event_has_every_field_in_contract_order() -> None:
    ev = binlog_event(1, "mysql-bin.000001", 256, 10, None, "commit", xid=7)
    assert tuple(ev) == BINLOG_FIELDS
    assert ev["xid"] == 7 and ev["rows"] is None


def test_change_rows_of_insert_update_delete() -> None:
    before = {"order_id": 1, "line_no": 2, "qty": 1, "note": "x"}
    after = {"order_id": 1, "line_no": 1, "qty": 1, "note": None}
    insert = change_row_of("9", "t", 1, KEYS, None, after)
    assert (insert["op"], insert["key"], insert["old_key"], insert["values"]) == (
        "I", {"order_id": 1, "line_no": 1}, None, after)
    update = change_row_of("9", "t", 2, KEYS, before, after)
    # a key change names the old key; only changed columns, a column set to NULL included
    assert (update["op"], update["old_key"], update["values"]) == (
        "U", {"order_id": 1, "line_no": 2}, {"line_no": 1, "note": None})
    same_key = change_row_of("9", "t", 3, KEYS, after, {**after, "qty": 2})
    assert same_key["old_key"] is None and same_key["values"] == {"qty": 2}
    delete = change_row_of("9", "t", 4, KEYS, before, None)
    assert (delete["op"], delete["key"], delete["values"]) == ("D", {"order_id": 1, "line_no": 2}, None)


def test_times_from_epoch_numbers() -> None:
    assert iso_us(1_000_001) == "1970-01-01T00:00:01.000001Z"
    assert iso_s(61) == "1970-01-01T00:01:01Z"


def test_a_landing_file_appears_only_when_closed(tmp_path: Path) -> None:
    f = LandingFile(tmp_path / "a" / "x.jsonl")
    f.write(json.dumps({"n": 1}))
    assert not (tmp_path / "a" / "x.jsonl").exists()
    assert f.close().read_text() == '{"n": 1}\n'
    assert not list((tmp_path / "a").glob(f"{TMP_PREFIX}*"))


def test_a_file_series_publishes_each_file_on_rotation(tmp_path: Path) -> None:
    series = FileSeries(tmp_path, lambda n: numbered_file("txns", n, 5), first=3)
    series.write("1")
    series.write("2")
    assert series.lines == 2
    series.rotate()
    assert (tmp_path / "txns-00003.jsonl").read_text() == "1\n2\n"
    series.write("3")
    series.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["txns-00003.jsonl", "txns-00004.jsonl"]
