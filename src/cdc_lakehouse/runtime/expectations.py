"""Data quality expectations: count every row that passes or fails, drop or fail as declared."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Observation
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


def apply_expectations(df: DataFrame, dataset: str, expectations: list[Expectation], counted_now: bool = False):
    """Returns the rows to keep and the pass/fail counts of each expectation (``counts()``).

    The counts are observed while the kept rows are written, in the same pass: call
    ``counts()`` after the write. An ``expect_or_fail`` expectation, and ``counted_now``, count
    first instead (the batch is cached for the write), since a failure must stop the write.
    A constraint that evaluates to NULL counts as failed: a quality rule that cannot be shown
    to hold does not hold.
    """
    if not expectations:
        return df, lambda: []
    flagged = df.withColumns(
        {_flag(i): F.coalesce(F.expr(e.constraint), F.lit(False)) for i, e in enumerate(expectations)}
    )
    metrics = [F.count(F.lit(1)).alias("total"),
               *[F.sum(F.when(F.col(_flag(i)), 0).otherwise(1)).alias(_flag(i)) for i in range(len(expectations))]]
    if counted_now or any(e.action == "fail" for e in expectations):
        flagged = flagged.persist()
        results = _results(dataset, expectations, flagged.agg(*metrics).collect()[0].asDict())
        _fail_on_violations(dataset, results, flagged)
        counts = lambda: results  # noqa: E731
    else:
        counts = _Observed(dataset, expectations, flagged, metrics)
        flagged = counts.observed
    keep = F.lit(True)
    for i, e in enumerate(expectations):
        if e.action == "drop":
            keep = keep & F.col(_flag(i))
    return flagged.filter(keep).drop(*[_flag(i) for i in range(len(expectations))]), counts


def _results(dataset: str, expectations: list[Expectation], counts: dict) -> list[ExpectationResult]:
    total = counts["total"] or 0
    failed = [counts[_flag(i)] or 0 for i in range(len(expectations))]
    return [ExpectationResult(dataset, e.name, e.action, total - f, f) for e, f in zip(expectations, failed)]


def _fail_on_violations(dataset: str, results: list[ExpectationResult], flagged: DataFrame) -> None:
    failing = [r for r in results if r.action == "fail" and r.failed]
    if failing:
        flagged.unpersist()
        details = "; ".join(f"'{r.name}' failed on {r.failed} row(s)" for r in failing)
        raise ExpectationViolation(f"{dataset}: expectation violated: {details}")


class _Observed:
    """Counts taken by the write's own pass over the batch. A write that never ran (its batch
    was committed before a crash) or whose plan left the counting step out is counted apart."""

    def __init__(self, dataset: str, expectations: list[Expectation], flagged: DataFrame, metrics: list):
        self.dataset, self.expectations, self.flagged, self.metrics = dataset, expectations, flagged, metrics
        self.observation = Observation(f"expectations of {dataset}")
        self.observed = flagged.observe(self.observation, *metrics)

    def __call__(self) -> list[ExpectationResult]:
        # Observation.get blocks until an action has run; the local JVM object says whether one has.
        if self.observation._jo.future().isCompleted():  # type: ignore[union-attr]
            counts = self.observation.get
        else:
            counts = self.flagged.agg(*self.metrics).collect()[0].asDict()
        return _results(self.dataset, self.expectations, counts)
