"""``python -m bench`` argument checks: bad values stop at parse time (exit 2, one line naming the
value) instead of measuring something else, doing nothing, or failing after the benchmark ran.
Nothing here starts Spark or runs a benchmark."""

from __future__ import annotations

import json

import pytest

from bench import cli


def rejected(capsys, *argv) -> str:
    """Parse ``argv``; expect argparse's exit 2 and return its error line."""
    with pytest.raises(SystemExit) as exc:
        cli.parser().parse_args(list(argv))
    assert exc.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def phases(pipeline=True, runs=(True, True), snapshot=True) -> dict:
    return {"throughput": {"pipeline": {"ok": pipeline}},
            "apply_scaling": {"runs": [{"ok": ok} for ok in runs]},
            "snapshot": {"ok": snapshot}}


@pytest.mark.parametrize("result, code", [
    (phases(), 0),
    (phases(pipeline=False), 1),
    (phases(runs=(True, False)), 1),
    (phases(snapshot=False), 1),
    ({"snapshot": {"ok": True}}, 0),
])
def test_exit_code_is_1_when_any_phase_failed(result, code):
    assert cli.exit_code(result) == code


@pytest.mark.parametrize("option, value", [
    ("--methods", "auto-cdc"), ("--methods", ""), ("--dist", "recnet"), ("--scd", "3"),
    ("--sizes", ""), ("--sizes", "0"), ("--sizes", "-5"), ("--sizes", "ten"),
])
def test_apply_scaling_rejects_unknown_or_empty_values(capsys, option, value):
    line = rejected(capsys, "apply-scaling", option, value)
    assert option in line and repr(value) in line


def test_apply_scaling_accepts_known_values():
    args = cli.parser().parse_args(["apply-scaling", "--methods", "merge", "--dist", "uniform,recent",
                                    "--scd", "1,2", "--sizes", "1e5,2000"])
    assert (args.methods, args.dist, args.scd, args.sizes) == (("merge",), ("uniform", "recent"), (1, 2), (100_000, 2000))


@pytest.mark.parametrize("option, value", [("--forms", "binlgo"), ("--forms", ","), ("--tables", "orders,nope")])
def test_generate_rejects_unknown_forms_and_tables(capsys, tmp_path, option, value):
    line = rejected(capsys, "generate", "--out", str(tmp_path), option, value)
    assert option in line and value.split(",")[-1] in line


def test_throughput_rejects_an_unknown_layer(capsys):
    line = rejected(capsys, "throughput", "--layers", "bronze,silvr")
    assert "--layers" in line and "silvr" in line


def test_report_rejects_a_missing_json(capsys, tmp_path):
    assert str(tmp_path / "missing.json") in rejected(capsys, "report", "--json", str(tmp_path / "missing.json"))


def test_output_files_are_checked_at_parse_time(capsys, tmp_path):
    (tmp_path / "a_file").write_text("")
    assert "--json" in rejected(capsys, "all", "--json", str(tmp_path))
    assert "--markdown" in rejected(capsys, "all", "--markdown", str(tmp_path / "a_file" / "out.md"))
    args = cli.parser().parse_args(["all", "--markdown", str(tmp_path / "new" / "dir" / "out.md")])
    assert args.markdown == tmp_path / "new" / "dir" / "out.md"


def test_report_creates_the_markdown_folder(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({}))
    out = tmp_path / "new" / "dir" / "out.md"
    assert cli.main(["report", "--json", str(tmp_path / "result.json"), "--markdown", str(out)]) == 0
    assert out.is_file()


def test_report_of_a_file_that_is_no_results_is_one_error_line(tmp_path):
    (tmp_path / "result.json").write_text("{not json")
    with pytest.raises(SystemExit) as stopped:
        cli.main(["report", "--json", str(tmp_path / "result.json")])
    assert str(stopped.value).startswith(f"error: {tmp_path / 'result.json'} is not a results file")
