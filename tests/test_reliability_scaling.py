"""Work that must stay linear in the input, checked on the query plan (never on timings).

``bronze.lines.numbered_lines`` splits each landing file into lines. If ``split(value, '\\n')``
is evaluated by an operator *above* the ``posexplode`` (Generate), it runs once per output line
over the whole file: quadratic in the lines of a file (bench/history/RESULTS-until-2026-12-07.md:
a 20k-line landing file did not get through bronze in 8 minutes before this was fixed).
"""

from __future__ import annotations

from pyspark.sql import functions as F

from cdc_lakehouse.bronze.lines import numbered_lines


def _operators_above_generate(df) -> list[str]:
    plan = df._jdf.queryExecution().executedPlan().toString().splitlines()
    generate = next(i for i, line in enumerate(plan) if "Generate " in line)
    return plan[:generate]


def test_landing_files_are_split_into_lines_once(spark, tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\r\n')
    files = spark.read.format("text").option("wholetext", "true").load(str(path)).select(
        "value", F.col("_metadata.file_path").alias("_source_file"))
    lines = numbered_lines(files)
    assert [r["_raw"] for r in lines.collect()] == ['{"a": 1}', '', '{"a": 2}']
    above = [line for line in _operators_above_generate(lines) if "split(" in line]
    assert not above, "split() evaluated per output line:\n" + "\n".join(above)
