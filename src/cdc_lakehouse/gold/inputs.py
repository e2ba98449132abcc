"""The names of what gold reads and writes, from the pipeline settings (schemas are configurable)."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame

from cdc_lakehouse.settings import CHANGE_STREAM_CAPTURES


def sources(settings) -> list[str]:
    return sorted({flow.source for flow in settings.onboarding.flows})


def flows_of(settings, source: str) -> list:
    return [flow for flow in settings.onboarding.flows if flow.source == source]


def changes_table(settings, source: str) -> str:
    return f"{settings.silver}.{source}_changes"


def has_change_stream(settings, source: str) -> bool:
    return any(flow.capture in CHANGE_STREAM_CAPTURES for flow in flows_of(settings, source))


def anomalies_table(settings, source: str) -> str:
    """``silver.<source>_anomalies`` (apply_policy.py); only sources with a change stream have one."""
    return f"{settings.silver}.{source}_anomalies"


def transactions_table(settings, source: str) -> str:
    return f"{settings.silver}.{source}_transactions"


def enrichments_table(settings, source: str) -> str:
    """``silver.<source>_session_enrichments`` (silver/session_enrichment.py); binlog sources only."""
    return f"{settings.silver}.{source}_session_enrichments"


def has_enrichments(settings, source: str) -> bool:
    return any(flow.capture == "binlog" for flow in flows_of(settings, source))


def gold_name(settings, table: str) -> str:
    return f"{settings.gold}.{table}"


def silver_replicas(settings, source: str) -> list[str]:
    """The silver SCD1 replicas and SCD2 histories of the source."""
    names = []
    for flow in flows_of(settings, source):
        names += [f"{settings.silver}.{t}" for t in (flow.silver_table, flow.scd2_table) if t]
    return names


def existing(read, names: list[str]) -> list[tuple[str, DataFrame]]:
    """(name, ``read(name)``) of the tables that exist. On Databricks every declared table exists
    from the pipeline's first update on; the local runtime creates an AUTO CDC target only
    with its first change, so a replica of a table nothing changed in yet is skipped."""
    found = []
    for name in names:
        try:
            found.append((name, read(name)))
        except LookupError:
            continue
    return found


def union_all(parts: list[DataFrame]) -> DataFrame:
    return reduce(DataFrame.unionByName, parts)
