"""Quality rules of a bronze table: its expectations, and the quarantine reason of a line.

A rule's condition reads only the bronze table's own columns, so it is a plain DLT expectation
on that table (``expect_all_or_drop``, counted in the event log). The quarantine table keeps
exactly the lines that fail at least one of them: its ``_reason`` is NULL iff all hold, and its
own expectation is ``_reason IS NOT NULL`` (the usual DLT quarantine pattern, inverted rules).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.json_text import NOT_UTF8_REASON

QUARANTINE_EXPECTATION = {"quarantined: fails a bronze rule": "_reason IS NOT NULL"}


@dataclass(frozen=True)
class Rule:
    name: str  # the expectation's name in the event log
    condition: str  # SQL over the bronze columns, true when the line is fine
    message: str | None = None  # SQL for the reason; may read _raw, _fields, _bad_fields

    @property
    def holds(self) -> str:
        # A rule that cannot be evaluated does not hold, on Databricks and locally alike.
        return f"coalesce(({self.condition}), false)"


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def expectations(rules: tuple[Rule, ...]) -> dict[str, str]:
    return {rule.name: rule.holds for rule in rules}


def reason(rules: tuple[Rule, ...]) -> Column:
    """Why a line is quarantined; NULL when every rule holds."""
    all_hold = F.expr(" AND ".join(rule.holds for rule in rules))
    failures = [F.expr(f"CASE WHEN NOT {r.holds} THEN {r.message or sql_string(r.name)} END") for r in rules]
    return (
        F.when(all_hold, None)
        .when(F.col("_raw").rlike(r"^\s*$"), "blank line")
        .when(F.col("_json_problem") == NOT_UTF8_REASON, F.col("_json_problem"))
        .when(F.col("_fields").isNull(), F.concat_ws(": ", F.lit("unparseable line: not one JSON object"), "_json_problem"))
        .otherwise(F.coalesce(F.nullif(F.concat_ws("; ", *failures), F.lit("")), F.lit("fails a bronze rule")))
    )


def required(columns: list[str]) -> Rule:
    """The columns are present; a present but bad value is reported by ``types`` instead."""
    missing = ", ".join(
        f"CASE WHEN `{c}` IS NULL AND NOT array_contains(_bad_fields, '{c}') THEN '{c}' END" for c in columns
    )
    return Rule(
        "required fields present",
        " AND ".join(f"`{c}` IS NOT NULL" for c in columns),
        f"nullif(concat('missing ', array_join(array_compact(array({missing})), ', ')), 'missing ')",
    )


def types(known: list[str]) -> Rule:
    """No contract field was set aside in ``_rescued_data``: unknown fields alone are fine."""
    known_sql = ", ".join(f"'{name}'" for name in known)
    return Rule(
        "fields have their contract types",
        f"_rescued_data IS NULL OR NOT arrays_overlap(json_object_keys(_rescued_data), array({known_sql}))",
        "concat('wrong type or unparseable value: ', array_join(_bad_fields, ', '))",
    )
