"""An update with nothing to do is known before any flow plans, and writes nothing.

Before the flows run, every flow is asked, cheaply and without running what it reads, whether
it has work: a streaming flow whether its sources moved since its last batch (``FlowBatch.quiet``:
Delta versions from the log, file listings), a materialized view whether the tables its last
refresh read are at the versions it read (``unchanged_views``). When none has, upstream flows
have none either, so those answers hold without bringing anything up to date: the update ends
there, with no Spark job, no Delta commit and no event-log row. As soon as one flow has work, the
update runs as usual.

A view that reads the clock (``current_timestamp``) is recomputed at every update that has
work, as Databricks does; in an update that has none it is kept, with the time it was measured
(``measured_at`` in gold's health views; the dashboard computes live ages when it reads them).
Select such a view (``cdc-lakehouse run --refresh-table``) to recompute it in a quiet update.

The event log is compared with the version the last update left it at, when that update ran
every table to the end (no flow failed, no table selection): its views that read the log
(gold.replication_health) were refreshed after its events were written, and what landed after
that are their own events, which they do not read. An update that ended otherwise leaves no such
record, so the next one runs and brings those views up to date.

A check that fails (a landing file gone between its listing and its stat, a table that cannot
be read) counts as work: the update runs, and the error fails that flow alone, as it would.
"""

from __future__ import annotations

from pathlib import Path

from cdc_lakehouse.runtime.checkpoint import FlowCheckpoint, read_json, write_json
from cdc_lakehouse.runtime.event_log import FlowEvent
from cdc_lakehouse.runtime.flow_batch import FlowBatch, NoNewInput
from cdc_lakehouse.runtime.unchanged_views import UNCHANGED, kept_in_a_quiet_update
from cdc_lakehouse.settings import EVENT_LOG_TABLE

NO_NEW_INPUT = "no new input"
LAST_UPDATE = "last_update.json"  # in the checkpoints folder: the event log as a whole update left it


def record_whole_update(runner) -> None:
    """After an update that ran every table to the end and wrote its events."""
    write_json(Path(runner.checkpoints) / LAST_UPDATE, {"event_log_version": runner.store.version(EVENT_LOG_TABLE)})


def forget_whole_update(runner) -> bool:
    """Before an update writes anything: until it ends whole, the next update may not be quiet.
    Whether the last update ended whole, with no failure, and nothing was logged since."""
    whole = event_log_as_left(runner)
    (Path(runner.checkpoints) / LAST_UPDATE).unlink(missing_ok=True)
    return whole


def quiet_update_events(runner) -> list[FlowEvent] | None:
    """One SKIPPED event per flow when no flow of the update has work; else None."""
    if runner.full_refresh or runner.refresh or not event_log_as_left(runner):
        return None
    events = []
    for name in sorted(n for n, d in runner.graph.datasets.items() if d.persisted):
        if runner.tables.deleted(name):
            return None
        for flow in sorted(runner.graph.flows_into(name), key=lambda f: f.name):
            why = _why_quiet(runner, flow)
            if why is None:
                return None
            event = FlowEvent(runner.result.update_id, flow.name, flow.target, flow.kind, status="SKIPPED", message=why)
            events.append(event)
    return events


def event_log_as_left(runner) -> bool:
    """Whether the event log is as the last whole update, ended with no failure, left it."""
    recorded = read_json(Path(runner.checkpoints) / LAST_UPDATE).get("event_log_version")
    return recorded is not None and recorded == runner.store.version(EVENT_LOG_TABLE)


def _why_quiet(runner, flow) -> str | None:
    """Why ``flow`` has nothing to do, judged as if every flow upstream of it had none either."""
    try:
        return _checked_quiet(runner, flow)
    except Exception:  # noqa: BLE001 - the update runs, and the flow meets the error there
        return None


def _checked_quiet(runner, flow) -> str | None:
    batch = FlowBatch(runner, flow, FlowCheckpoint(runner.checkpoints, flow.name))
    try:
        batch.open()
    except NoNewInput:  # a once flow that ran
        return NO_NEW_INPUT
    if batch.quiet():
        return NO_NEW_INPUT
    if flow.kind == "query" and not batch.replay and kept_in_a_quiet_update(batch, flow.target):
        return UNCHANGED
    return None
