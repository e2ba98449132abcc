"""Start a pipeline update and follow it from the pipeline events.

REST endpoints (Pipelines API 2.0), through ``databricks-sdk``:

* ``GET  /api/2.0/pipelines?filter=name LIKE '...'``        ``w.pipelines.list_pipelines``
* ``GET  /api/2.0/pipelines/{id}``                          ``w.pipelines.get``
* ``POST /api/2.0/pipelines/{id}/updates``                  ``w.pipelines.start_update``
* ``GET  /api/2.0/pipelines/{id}/updates/{update_id}``      ``w.pipelines.get_update``
* ``GET  /api/2.0/pipelines/{id}/events``                   ``w.api_client.do`` + ``PipelineEvent.from_dict``

Events are read with the SDK's API client rather than ``w.pipelines.list_pipeline_events``
for two reasons: the typed ``PipelineEvent`` drops the ``details`` object (flow status, row
counts, expectation results) that the event log carries, and the iterator resends ``filter``
and ``order_by`` with ``page_token``, which the API documents as mutually exclusive. Each
event is still parsed with ``PipelineEvent.from_dict`` for the documented fields.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterator

from databricks.sdk import WorkspaceClient
from databricks.sdk.service.pipelines import PipelineEvent, StartUpdateCause, UpdateInfoState

TERMINAL_STATES = frozenset({UpdateInfoState.COMPLETED, UpdateInfoState.FAILED, UpdateInfoState.CANCELED})
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
EVENTS_PAGE = 250  # documented maximum: 1000


class RemoteError(LookupError):
    """A remote request that cannot be carried out as asked (unknown or ambiguous pipeline, ...)."""


# ------------------------------------------------------------------------------- pipelines


def resolve_pipeline(w: WorkspaceClient, pipeline: str) -> str:
    """Pipeline id from an id or a name.

    A bundle deploys ``cdc-lakehouse-<target>``; in development mode the name gets a
    ``[dev <user>] `` prefix, so a name also matches a single pipeline named ``<prefix>] <name>``.
    """
    if UUID.match(pipeline):
        return pipeline
    if not pipeline.strip():
        raise RemoteError("no pipeline given: pass --pipeline (an id or a name) or set CDC_LAKEHOUSE_PIPELINE")
    pattern = pipeline.replace("'", "''")
    candidates = list(w.pipelines.list_pipelines(filter=f"name LIKE '%{pattern}%'"))
    exact = [p for p in candidates if p.name == pipeline]
    if len(exact) == 1:
        return exact[0].pipeline_id
    # Only the development prefix may be left out: "dev" must not pick "cdc-lakehouse-dev".
    suffixed = [p for p in candidates if (p.name or "").endswith(f"] {pipeline}")]
    if len(suffixed) == 1:
        return suffixed[0].pipeline_id
    if not exact and not suffixed:
        hint = f"; similar names: {_names(candidates)}" if candidates else " (deployed? try `databricks bundle summary`)"
        raise RemoteError(f"no pipeline named like {pipeline!r} in this workspace{hint}")
    raise RemoteError(f"{pipeline!r} matches several pipelines: {_names(exact or suffixed)}; pass the pipeline id or the full name")


def _names(found) -> str:
    return ", ".join(sorted(f"{p.name!r} ({p.pipeline_id})" for p in found))


def latest_update_id(w: WorkspaceClient, pipeline_id: str) -> str:
    updates = w.pipelines.get(pipeline_id).latest_updates or []
    if not updates:
        raise RemoteError(f"pipeline {pipeline_id} has no update yet: start one with `cdc-lakehouse remote start`")
    return updates[0].update_id


def start_update(
    w: WorkspaceClient,
    pipeline_id: str,
    *,
    full_refresh: bool = False,
    full_refresh_tables: list[str] | None = None,
    refresh_tables: list[str] | None = None,
    validate_only: bool = False,
) -> str:
    """Start an update and return its id.

    With neither selection the whole graph is updated (``full_refresh`` resets every table
    first). With ``full_refresh_tables`` and/or ``refresh_tables`` only those tables are
    updated, the first ones after their state is reset, as the API documents.
    """
    full_refresh_tables = list(full_refresh_tables or [])
    refresh_tables = list(refresh_tables or [])
    if full_refresh and (full_refresh_tables or refresh_tables):
        raise RemoteError("--full-refresh resets every table; do not combine it with a table selection")
    overlap = sorted(set(full_refresh_tables) & set(refresh_tables))
    if overlap:
        raise RemoteError(f"tables both fully refreshed and refreshed: {', '.join(overlap)}")
    response = w.pipelines.start_update(
        pipeline_id,
        cause=StartUpdateCause.API_CALL,
        full_refresh=full_refresh or None,
        full_refresh_selection=full_refresh_tables or None,
        refresh_selection=refresh_tables or None,
        validate_only=validate_only or None,
    )
    if not response.update_id:
        raise RemoteError(f"the workspace started no update for pipeline {pipeline_id}")
    return response.update_id


# ---------------------------------------------------------------------------------- events


@dataclass
class Event:
    """One pipeline event: the documented fields, plus ``details`` when the API returns it."""

    event: PipelineEvent
    details: dict

    @property
    def id(self) -> str:
        return self.event.id or ""

    @property
    def update_id(self) -> str | None:
        return self.event.origin.update_id if self.event.origin else None

    @property
    def flow(self) -> str | None:
        origin = self.event.origin
        return (origin.flow_name or origin.dataset_name) if origin else None

    @property
    def flow_progress(self) -> dict:
        return self.details.get("flow_progress") or {}

    @property
    def flow_status(self) -> str | None:
        return self.flow_progress.get("status")

    @property
    def output_rows(self) -> int | None:
        return (self.flow_progress.get("metrics") or {}).get("num_output_rows")

    @property
    def dropped_rows(self) -> int | None:
        return (self.flow_progress.get("data_quality") or {}).get("dropped_records")

    @property
    def error_messages(self) -> list[str]:
        error = self.event.error
        return [e.message for e in (error.exceptions or []) if e.message] if error else []

    def line(self) -> str:
        level = self.event.level.value if self.event.level else "INFO"
        text = self.event.message or ""
        if self.flow_status:
            text = f"{self.flow}: {self.flow_status}"
            extra = [f"{name}={value}" for name, value in (("rows", self.output_rows), ("dropped", self.dropped_rows))
                     if value is not None]
            if extra:
                text += f" ({', '.join(extra)})"
        lines = [f"{_clock(self.event.timestamp)} {level:<5} {self.event.event_type or '-':<16} {text}"]
        lines += [f"{'':>26}{message}" for message in self.error_messages]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {**self.event.as_dict(), **({"details": self.details} if self.details else {})}


def list_events(w: WorkspaceClient, pipeline_id: str, since: str | None = None) -> Iterator[Event]:
    """Events at or after ``since`` (an ISO timestamp), oldest first, every page."""
    query: dict = {"order_by": ["timestamp asc"], "max_results": EVENTS_PAGE}
    if since:
        query["filter"] = f"timestamp >= '{since}'"
    while True:
        page = w.api_client.do("GET", f"/api/2.0/pipelines/{pipeline_id}/events", query=query,
                               headers={"Accept": "application/json"})
        for raw in page.get("events") or []:
            yield Event(PipelineEvent.from_dict(raw), raw.get("details") or {})
        token = page.get("next_page_token")
        if not token:
            return
        # page_token excludes every other field except max_results (API reference).
        query = {"page_token": token, "max_results": EVENTS_PAGE}


# ---------------------------------------------------------------------------------- follow


@dataclass
class FollowResult:
    update_id: str
    state: str
    flows: dict[str, str] = field(default_factory=dict)  # flow -> last status (from details)
    errors: list[str] = field(default_factory=list)
    events: int = 0

    @property
    def ok(self) -> bool:
        return self.state == UpdateInfoState.COMPLETED.value


def follow_update(
    w: WorkspaceClient,
    pipeline_id: str,
    update_id: str,
    *,
    out: Callable[[str], None] = print,
    poll_seconds: float = 5.0,
    timeout_seconds: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    as_json: bool = False,
) -> FollowResult:
    """Print the events of one update as they arrive, until the update ends.

    The update's state (``get_update``) decides when it has ended; the events after that are
    read once more so the last ones are not missed. Events of other updates are skipped.
    """
    import json

    started = time.monotonic()
    update = w.pipelines.get_update(pipeline_id, update_id).update
    since = _iso_from_millis(update.creation_time) if update and update.creation_time else None
    seen: set[str] = set()
    result = FollowResult(update_id, _state(update))
    out(f"following update {update_id} of pipeline {pipeline_id}: {result.state}")

    def drain() -> None:
        nonlocal since
        for event in list_events(w, pipeline_id, since):
            if event.id in seen:
                continue
            seen.add(event.id)
            if event.event.timestamp and (since is None or event.event.timestamp > since):
                since = event.event.timestamp
            if event.update_id != update_id:
                continue
            result.events += 1
            if event.flow and event.flow_status:
                result.flows[event.flow] = event.flow_status
            if event.event.level and event.event.level.value == "ERROR":
                result.errors.append(event.event.message or "; ".join(event.error_messages))
            out(json.dumps(event.as_dict(), sort_keys=True) if as_json else event.line())

    while True:
        drain()
        if update and update.state in TERMINAL_STATES:
            drain()  # events written while the update finished
            break
        if timeout_seconds is not None and time.monotonic() - started > timeout_seconds:
            result.state = _state(update)
            out(f"still {result.state} after {timeout_seconds:.0f}s: stopped following (the update goes on)")
            result.errors.append("timed out following the update")
            return result
        sleep(poll_seconds)
        update = w.pipelines.get_update(pipeline_id, update_id).update
        if _state(update) != result.state:
            result.state = _state(update)
            out(f"update {update_id}: {result.state}")
    result.state = _state(update)
    return result


def summary_lines(result: FollowResult) -> list[str]:
    lines = [f"update {result.update_id}: {result.state} ({result.events} events)"]
    width = max((len(flow) for flow in result.flows), default=0)
    lines += [f"  {flow:<{width}}  {status}" for flow, status in sorted(result.flows.items())]
    lines += [f"  error: {message}" for message in result.errors]
    return lines


def _state(update) -> str:
    return update.state.value if update is not None and update.state is not None else "UNKNOWN"


def _iso_from_millis(millis: int) -> str:
    moment = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _clock(timestamp: str | None) -> str:
    if not timestamp:
        return "--:--:--"
    match = re.search(r"T(\d\d:\d\d:\d\d)", timestamp)
    return match.group(1) if match else timestamp
