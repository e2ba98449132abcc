"""The top-level splitter that keeps nested JSON values exactly as the source wrote them."""

from __future__ import annotations

import pytest

from cdc_lakehouse.bronze.json_text import top_level_fields


def test_nested_values_keep_their_source_text():
    line = '{"a": 1, "rows" : [{"after": {"x": 0.00, "y": 12345678901234567.891, "s": "}\\"{"}}], "n": null}'
    assert top_level_fields(line) == {
        "a": "1",
        "rows": '[{"after": {"x": 0.00, "y": 12345678901234567.891, "s": "}\\"{"}}]',
        "n": "null",
    }


def test_strings_stay_quoted_and_keys_are_decoded():
    assert top_level_fields('{"k\\u00e9": "v\\n", "t": true}') == {"ké": '"v\\n"', "t": "true"}


def test_surrounding_whitespace_and_empty_object():
    assert top_level_fields(' \t{ }\r') == {}
    assert top_level_fields('{"a":1}\r') == {"a": "1"}


def test_a_repeated_key_keeps_its_last_value():
    assert top_level_fields('{"a": 1, "a": 2}') == {"a": "2"}


@pytest.mark.parametrize(
    "line",
    [None, "", "   ", "[1, 2]", '"text"', "5", '{"a": 1} trailing', '{"a": 1}{"b": 2}', '{"a": NaN}',
     '{"a": Infinity}', '{"a": 1,}', "{a: 1}", '{"a" 1}', '{"a": 1', '{"a": [1, 2}', '{"a": "\x01"}'],
)
def test_anything_but_one_json_object_is_rejected(line):
    assert top_level_fields(line) is None
