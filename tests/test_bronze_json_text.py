"""Taking JSON apart without changing a number: the top-level splitter of landing lines (bronze)
and the row image readers of silver and gold."""

from __future__ import annotations

import pytest

from cdc_lakehouse.bronze.json_text import (
    NOT_UTF8_REASON, compact_members, image_values, line_fields, row_images, top_level_fields,
)


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


@pytest.mark.parametrize(("line", "problem"), [
    ('{"table": "a", "x": 1, "table": "b"}', 'member "table" appears twice'),
    ('{"rows": [{"after": {"id": 1, "id": 2}}]}', 'member "id" appears twice'),
    ('{"a": NaN}', "NaN is not JSON"),
    ('{"a": 1', "expected ',' at character 7"),
    ('[1, 2]', "expected '{' at character 0"),
])
def test_a_member_named_twice_at_any_depth_rejects_the_line_and_says_so(line, problem):
    """JSON readers disagree on which of two members counts: the line is not taken at all."""
    assert line_fields(line) == (None, problem)


@pytest.mark.parametrize(
    "line",
    [None, "", "   ", "[1, 2]", '"text"', "5", '{"a": 1} trailing', '{"a": 1}{"b": 2}', '{"a": NaN}',
     '{"a": Infinity}', '{"a": 1,}', "{a: 1}", '{"a" 1}', '{"a": 1', '{"a": [1, 2}', '{"a": "\x01"}'],
)
def test_anything_but_one_json_object_is_rejected(line):
    assert top_level_fields(line) is None


ROWS = ('[{"before": {"id": 1, "x": 0.00, "s": "a\\u00e9\\"", "n": null}, '
        '"after": {"id": 1, "x": 12345678901234567890.123, "t": true}}, {"after": {"id": 2}}, {"before": null}]')


def test_row_images_are_compact_with_their_numbers_as_written():
    assert row_images(ROWS) == [
        ('{"id":1,"x":0.00,"s":"a\u00e9\\"","n":null}', '{"id":1,"x":12345678901234567890.123,"t":true}'),
        (None, '{"id":2}'),
        (None, None),
    ]


def test_nested_values_are_kept_as_written():
    """A JSON column's text is what a snapshot's row holds for it too (Spark's file reader)."""
    rows = '[{"after": {"id": 1, "j": {"k": [1, 2.50]}}}, {"before": {"id": 2, "j": [ ]}, "after": {"id": 2}}]'
    assert row_images(rows) == [(None, '{"id":1,"j":{"k": [1, 2.50]}}'), ('{"id":2,"j":[ ]}', '{"id":2}')]


def test_members_are_json_text_in_source_order():
    assert list(compact_members('{"b": 1e3, "a": {"c": [1, 2]}, "n": null, "s": "1"}').items()) == [
        ("b", "1e3"), ("a", '{"c": [1, 2]}'), ("n", "null"), ("s", '"1"')]
    assert list(compact_members('{"b": 1e3, "n": null, "s": "1", "t": false}').items()) == [
        ("b", "1e3"), ("n", "null"), ("s", '"1"'), ("t", "false")]


def test_image_values_read_as_an_auditor_does():
    assert image_values('{"x": 1.50, "s": "v\\n", "j": {"k": 1}, "n": null, "f": false}') == {
        "x": "1.50", "s": "v\n", "j": '{"k": 1}', "n": None, "f": "false"}
    assert image_values('{"x": 1.50, "s": "v\\n", "n": null, "f": false}') == {
        "x": "1.50", "s": "v\n", "n": None, "f": "false"}


@pytest.mark.parametrize("text", [None, "", "[1]", '[{"after": {}}, 2]', '{"after": {}}', "[{}] x", '[{"a": NaN}]'])
def test_rows_that_are_no_array_of_objects_have_no_images(text):
    assert row_images(text) is None


@pytest.mark.parametrize("text", [None, "", "[]", '"text"', '{"a": Infinity}', '{"a": 1'])
def test_an_image_that_is_no_object_has_no_members(text):
    assert compact_members(text) is None
    assert image_values(text) is None


def test_a_replacement_character_is_no_line_to_take():
    assert line_fields('{"a": "caf\ufffd"}') == (None, NOT_UTF8_REASON)
