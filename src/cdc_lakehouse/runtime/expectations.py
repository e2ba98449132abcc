"""Data quality expectations: count every row that passes or fails, drop or fail as declared."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.runtime.graph import Expectation


class ExpectationViolation(RuntimeError):
    """An ``expect_or_fail`` expectation saw a failing row; the flow's update fails."""


@dataclass(frozen=True)
class ExpectationResult:
    dataset: str
    name: str
    action: str
    passed: int
    failed: int


def _flag(i: int) -> str:
    return f"__expectation_{i}"


def apply_expectations(df: DataFrame, dataset: str, expectations: list[Expectation]):
    """Returns the rows to keep and the pass/fail count of each expectation.

    A constraint that evaluates to NULL counts as failed: a quality rule that cannot be shown
    to hold does not hold.
    """
    if not expectations:
        return df, []
    flagged = df.withColumns(
        {_flag(i): F.coalesce(F.expr(e.constraint), F.lit(False)) for i, e in enumerate(expectations)}
    ).persist()
    counts = flagged.agg(
        F.count(F.lit(1)).alias("total"),
        *[F.sum(F.when(F.col(_flag(i)), 0).otherwise(1)).alias(_flag(i)) for i in range(len(expectations))],
    ).first()
    total = counts["total"]
    results = [
        ExpectationResult(dataset, e.name, e.action, total - (counts[_flag(i)] or 0), counts[_flag(i)] or 0)
        for i, e in enumerate(expectations)
    ]
    failing = [r for r in results if r.action == "fail" and r.failed]
    if failing:
        flagged.unpersist()
        details = "; ".join(f"'{r.name}' failed on {r.failed} row(s)" for r in failing)
        raise ExpectationViolation(f"{dataset}: expectation violated: {details}")
    keep = F.lit(True)
    for i, e in enumerate(expectations):
        if e.action == "drop":
            keep = keep & F.col(_flag(i))
    kept = flagged.filter(keep).drop(*[_flag(i) for i in range(len(expectations))])
    return kept, results
