"""Pipeline settings, read from the pipeline's ``configuration`` (``spark.conf``) as on Databricks."""

from __future__ import annotations

from dataclasses import dataclass

from cdc_lakehouse.config import Onboarding, load_onboarding

LANDING_PATH = "cdc_lakehouse.landing_path"
ONBOARDING_FILE = "cdc_lakehouse.onboarding_file"
ENV = "cdc_lakehouse.env"
HELD_RELEASE_AFTER = "cdc_lakehouse.held_release_after_minutes"

# The captures silver builds a change stream for (src/silver/changes.py), and with it the
# replicas' AUTO CDC input and an anomalies table; snapshot-only sources have neither.
CHANGE_STREAM_CAPTURES = ("binlog", "shadow")
# Table property of a materialized view whose windows all partition by these columns (comma-
# separated): the local runtime then refreshes it by partition (runtime/partition_refresh.py).
REFRESH_BY_PARTITION = "cdc_lakehouse.refresh.partition_by"
# Table property ("true") of a materialized view that reports the update's failed flows from the
# event log: the local runtime refreshes it after every other flow, and even when what it reads
# was left unfinished by a failure (runtime/runner.py). Databricks ignores it.
REPORTS_FAILURES = "cdc_lakehouse.reports_failures"
# The local runtime's event log table (runtime/event_log.py): one row per flow per update.
EVENT_LOG_TABLE = "pipeline.event_log"
# How the message of a flow skipped because what it reads was left unfinished by a failure begins.
SKIPPED_BY_FAILURE = "upstream failed: "


@dataclass(frozen=True)
class PipelineSettings:
    landing_path: str
    onboarding: Onboarding
    bronze: str = "bronze"
    silver: str = "silver"
    gold: str = "gold"
    # A held transaction begun this many minutes before its source's newest commit stops holding
    # gold back (gold/commit_point.py); None: gold waits for it however long.
    held_release_after_minutes: int | None = None

    @classmethod
    def from_spark(cls, spark) -> "PipelineSettings":
        def conf(key: str, default: str | None = None) -> str:
            value = spark.conf.get(key, default)
            if value is None:
                raise ValueError(f"the pipeline configuration needs '{key}' (set it in resources/*.pipeline.yml)")
            return value

        return cls(
            landing_path=conf(LANDING_PATH).rstrip("/"),
            onboarding=pipeline_onboarding(spark),
            bronze=conf("cdc_lakehouse.bronze_schema", "bronze"),
            silver=conf("cdc_lakehouse.silver_schema", "silver"),
            gold=conf("cdc_lakehouse.gold_schema", "gold"),
            held_release_after_minutes=_minutes(HELD_RELEASE_AFTER, spark.conf.get(HELD_RELEASE_AFTER, None)),
        )

    def sources(self, capture: str) -> list[str]:
        return sorted({f.source for f in self.onboarding.flows if f.capture == capture})


def pipeline_onboarding(spark) -> Onboarding:
    """The onboarding file the pipeline configuration names, for its env (default dev)."""
    path = spark.conf.get(ONBOARDING_FILE, None)
    if path is None:
        raise ValueError(f"the pipeline configuration needs '{ONBOARDING_FILE}' (set it in resources/*.pipeline.yml)")
    return load_onboarding(path, env=spark.conf.get(ENV, "dev"))


def _minutes(key: str, value: str | None) -> int | None:
    if value is None or value.strip() == "":
        return None
    if not value.strip().isdigit():
        raise ValueError(f"the pipeline configuration '{key}' must be a whole number of minutes (got {value!r})")
    return int(value)
