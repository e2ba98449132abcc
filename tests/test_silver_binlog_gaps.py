"""Quarantined binlog lines hold their transactions (silver/binlog_gaps.py, issue 41 case 1): a
transaction is never applied without one of its lines, and completes when the corrected line lands."""

from __future__ import annotations

import json

from cdc_lakehouse.bronze.landing import QUARANTINE_COLUMNS
from cdc_lakehouse.silver import binlog_gaps, binlog_held
from cdc_lakehouse.silver import binlog_transactions as bt

EVENTS = ("server_id long, file string, pos long, ts long, gtid string, type string, xid long, thread_id long, "
          "schema string, table string, query string, epoch long, _source string, _source_file string, "
          "_line long, _ingested_at timestamp")
FILE = "mysql-bin.000001"


def _events(spark, rows: list[tuple[int, str]]):
    data = [(1, FILE, pos, 1772442000, None, kind, pos if kind == "commit" else None, 7, None, None, None, None,
             "shop", "/landing/shop/binlog/1.jsonl", i + 1, None) for i, (pos, kind) in enumerate(rows)]
    return spark.createDataFrame(data, EVENTS)


def _quarantined(spark, lines: list[str]):
    rows = [(raw, "a reason", "shop", "/landing/shop/binlog/2.jsonl", i + 1, None, None, None) for i, raw in enumerate(lines)]
    return spark.createDataFrame(rows, "_raw string, _reason string, _source string, _source_file string, _line long, "
                                       "_ingested_at timestamp, _file_size long, _file_modified_at timestamp",
                                 ).select(*QUARANTINE_COLUMNS)


def _line(pos: int, kind: str, **members) -> str:
    return json.dumps({"server_id": 1, "file": FILE, "pos": pos, "ts": 1772442000, "type": kind, **members})


def _bad(pos: int, kind: str) -> str:
    """A line whose type is still readable: NaN is no JSON value."""
    return _line(pos, kind)[:-1] + ', "x": NaN}'


def _transactions(spark, events: list[tuple[int, str]], quarantined: list[str]) -> dict[int, tuple[str, str | None]]:
    log = bt.distinct_events(binlog_gaps.with_gaps(_events(spark, events), _quarantined(spark, quarantined)))
    txns = bt.transactions(log, None).collect()
    return {r.begin_lsn - (1 << 32): (r.status, r.held_because) for r in txns}


def test_a_line_that_tells_its_place_becomes_a_gap_read_leniently_or_by_pattern(spark):
    lines = [
        _line(120, "insert").replace('"type"', '"rows": [{"after": {"x": NaN}}], "type"'),  # lenient JSON
        _line(200, "begin")[:60],  # cut short: by pattern, its type unread
        "not json at all",  # no place: stays in quarantine only
        _line(300, "commit").replace(FILE, "mysql-bin.999999999"),  # a position out of range
    ]
    gaps = binlog_gaps.gaps(_quarantined(spark, lines), _events(spark, []).schema).collect()
    assert [(g.pos, g.type) for g in gaps] == [(120, binlog_gaps.GAP), (200, binlog_gaps.GAP_START)]
    assert gaps[0].query == "quarantined line 1 of /landing/shop/binlog/2.jsonl: a reason"


def test_a_transaction_with_a_quarantined_row_event_is_held_and_names_the_line(spark):
    txns = _transactions(spark, [(100, "begin"), (110, "insert"), (130, "commit"), (200, "begin"), (210, "insert"),
                                 (290, "commit")], [_bad(120, "insert")])
    assert txns == {100: ("incomplete", "quarantined line 1 of /landing/shop/binlog/2.jsonl: a reason"),
                    200: ("committed", None)}


def test_a_quarantined_begin_holds_the_events_after_it_instead_of_losing_them(spark):
    txns = _transactions(spark, [(100, "begin"), (110, "insert"), (190, "commit"), (210, "insert"), (290, "commit")],
                         ["\x00" + _line(200, "begin")])
    assert {k: v[0] for k, v in txns.items()} == {100: "committed", 200: "incomplete"}


def test_the_corrected_line_replaces_the_gap_and_the_transaction_commits(spark):
    events = [(100, "begin"), (110, "insert"), (120, "insert"), (130, "commit")]
    assert _transactions(spark, events, [_line(120, "insert") + "garbage"]) == {100: ("committed", None)}


def test_a_gap_in_a_rolled_back_transaction_holds_nothing(spark):
    txns = _transactions(spark, [(100, "begin"), (130, "rollback")], [_bad(120, "insert")])
    assert txns == {100: ("rolled_back", None)}


def test_held_state_keeps_an_incomplete_transaction(spark):
    log = bt.distinct_events(binlog_gaps.with_gaps(
        _events(spark, [(100, "begin"), (110, "insert"), (130, "commit"), (200, "begin"), (290, "commit")]),
        _quarantined(spark, [_bad(120, "insert")]),
    ))
    floors = binlog_held.floors_of(log, bt.transactions(log, None)).collect()
    assert [(f.server_id, f.floor - (1 << 32)) for f in floors] == [(1, 100)]


def test_quarantined_lines_between_transactions_hold_nothing(spark):
    """A begin-like gap followed by nothing it could have begun (the next begin, or only gaps)
    is no transaction: gold is not held back by a bad line that lost nothing."""
    txns = _transactions(spark, [(100, "begin"), (110, "insert"), (130, "commit"), (300, "begin"), (310, "insert"),
                                 (390, "commit")], [_line(200, "begin")[:60], _bad(210, "insert")[:-1]])
    assert txns == {100: ("committed", None), 300: ("committed", None)}
