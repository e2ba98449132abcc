"""The pipeline event log: one row per flow per update, kept as a Delta table like Lakeflow's."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from pyspark.sql import SparkSession

from cdc_lakehouse.settings import EVENT_LOG_TABLE

__all__ = ["EVENT_LOG_TABLE", "EVENT_LOG_SCHEMA", "FlowEvent", "append_events"]

EVENT_LOG_SCHEMA = (
    "update_id string, timestamp timestamp, flow string, target string, flow_type string, "
    "batch_id long, status string, rows_read long, rows_written long, "
    "expectations string, duration_s double, message string"
)


@dataclass
class FlowEvent:
    update_id: str
    flow: str
    target: str
    flow_type: str
    batch_id: int | None = None
    status: str = "COMPLETED"  # COMPLETED | SKIPPED | FAILED
    rows_read: int = 0
    rows_written: int = 0
    expectations: list = field(default_factory=list)
    duration_s: float = 0.0
    message: str | None = None
    timestamp: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def as_row(self) -> tuple:
        return (
            self.update_id, self.timestamp, self.flow, self.target, self.flow_type,
            self.batch_id, self.status, self.rows_read, self.rows_written,
            json.dumps([asdict(e) for e in self.expectations]), self.duration_s, self.message,
        )


def append_events(spark: SparkSession, store, events: list[FlowEvent]) -> None:
    if events:
        store.append(EVENT_LOG_TABLE, spark.createDataFrame([e.as_row() for e in events], EVENT_LOG_SCHEMA))
