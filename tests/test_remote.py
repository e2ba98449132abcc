"""``cdc-lakehouse remote ...`` against a local HTTP server that speaks the workspace REST API.

The SDK is the real ``databricks-sdk`` (``WorkspaceClient(host="http://127.0.0.1:PORT",
token=...)``); only the workspace is replaced, by ``LocalWorkspace`` below: an ``http.server``
in a thread that answers the endpoints the commands use with the documented response shapes
and enforces the documented request rules:

* Pipelines API 2.0 — ``GET /api/2.0/pipelines`` (``filter=name LIKE '...'``, ``statuses``),
  ``GET /api/2.0/pipelines/{id}`` (``latest_updates``, newest first),
  ``POST /api/2.0/pipelines/{id}/updates`` (``full_refresh``, ``full_refresh_selection``,
  ``refresh_selection``, ``cause``, ``validate_only`` -> ``update_id``),
  ``GET /api/2.0/pipelines/{id}/updates/{update_id}`` (``update.state`` among
  ``UpdateInfoState``), ``GET /api/2.0/pipelines/{id}/events`` (``filter`` on timestamp/level,
  ``order_by`` timestamp asc|desc, ``max_results`` <= 1000, pages with ``next_page_token``;
  ``page_token`` is exclusive with every field but ``max_results``).
* Statement Execution API 2.0 — ``POST /api/2.0/sql/statements`` (``wait_timeout`` 0s or
  5s..50s), ``GET /api/2.0/sql/statements/{id}`` (PENDING -> RUNNING -> SUCCEEDED|FAILED with
  ``manifest`` and the first ``result`` chunk), ``GET .../result/chunks/{n}``.
* Errors as the REST API returns them: ``{"error_code": ..., "message": ...}`` with the HTTP status.

The pipeline "runs" one state per ``get_update`` call, writing the events a triggered update
writes (``create_update``, ``update_progress``, ``flow_progress`` with ``details``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import threading
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from databricks.sdk import WorkspaceClient

from cdc_lakehouse.remote import health, pipelines
from cdc_lakehouse.remote.cli import add_remote_commands

TOKEN = "dapi-local-test"
WAREHOUSE = "abcdef0123456789"

START_FIELDS = {"cause", "full_refresh", "full_refresh_selection", "refresh_selection",
                "reset_checkpoint_selection", "validate_only", "development", "parameters",
                "replace_where_overrides", "rewind_spec"}
CAUSES = {"API_CALL", "RETRY_ON_FAILURE", "SERVICE_UPGRADE", "SCHEMA_CHANGE", "JOB_TASK",
          "USER_ACTION", "INFRASTRUCTURE_MAINTENANCE"}
UPDATE_STEPS = ["CREATED", "WAITING_FOR_RESOURCES", "INITIALIZING", "SETTING_UP_TABLES", "RUNNING"]
FLOW_STEPS = ["QUEUED", "STARTING", "RUNNING"]


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class LocalWorkspace:
    """What the commands need of a Databricks workspace, over real HTTP on 127.0.0.1."""

    def __init__(self, events_page_cap: int = 4, chunk_rows: int = 2):
        self.pipelines: dict[str, dict] = {}
        self.tables: dict[str, tuple[list[tuple[str, str]], list[list]]] = {}
        self.statements: dict[str, dict] = {}
        self.requests: list[dict] = []
        self.events_page_cap = events_page_cap
        self.chunk_rows = chunk_rows
        self.with_details = True
        self._clock = datetime(2026, 3, 2, 9, 0, 0, tzinfo=timezone.utc)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    # -- setup --------------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def add_pipeline(self, name: str, flows: list[str], fail_flow: str | None = None,
                     stuck: bool = False) -> str:
        pipeline_id = str(uuid.uuid4())
        self.pipelines[pipeline_id] = {"name": name, "flows": flows, "fail_flow": fail_flow, "stuck": stuck,
                                       "updates": [], "events": []}
        return pipeline_id

    def add_table(self, name: str, columns: list[tuple[str, str]], rows: list[list]) -> None:
        self.tables[name] = (columns, rows)

    def calls(self, method: str, pattern: str) -> list[dict]:
        return [r for r in self.requests if r["method"] == method and re.fullmatch(pattern, r["path"])]

    # -- HTTP ---------------------------------------------------------------------------------
    def _handler(self):
        workspace = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                url = urlparse(self.path)
                query = {k: v if len(v) > 1 or k == "order_by" else v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else {}
                if url.path.startswith("/api/"):
                    workspace.requests.append({"method": method, "path": url.path, "query": query, "body": body})
                try:
                    if url.path.startswith("/api/") and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                        raise ApiError(401, "UNAUTHENTICATED", "Invalid access token.")
                    with workspace._lock:
                        status, payload = 200, workspace.route(method, url.path, query, body)
                except ApiError as err:
                    status, payload = err.status, {"error_code": err.code, "message": err.message}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server API
                self._serve("GET")

            def do_POST(self):  # noqa: N802
                self._serve("POST")

            def log_message(self, *args):  # keep test output clean
                pass

        return Handler

    def route(self, method: str, path: str, query: dict, body: dict):
        routes = [
            ("GET", r"/api/2\.0/pipelines", self.list_pipelines),
            ("GET", r"/api/2\.0/pipelines/([^/]+)", self.get_pipeline),
            ("POST", r"/api/2\.0/pipelines/([^/]+)/updates", self.start_update),
            ("GET", r"/api/2\.0/pipelines/([^/]+)/updates/([^/]+)", self.get_update),
            ("GET", r"/api/2\.0/pipelines/([^/]+)/events", self.list_events),
            ("POST", r"/api/2\.0/sql/statements", self.execute_statement),
            ("GET", r"/api/2\.0/sql/statements/([^/]+)", self.get_statement),
            ("GET", r"/api/2\.0/sql/statements/([^/]+)/result/chunks/(\d+)", self.get_chunk),
            ("POST", r"/api/2\.0/sql/statements/([^/]+)/cancel", self.cancel_statement),
        ]
        for verb, pattern, handler in routes:
            match = re.fullmatch(pattern, path)
            if verb == method and match:
                return handler(*match.groups(), query=query, body=body)
        raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{method} {path}'")

    # -- pipelines ----------------------------------------------------------------------------
    def _pipeline(self, pipeline_id: str) -> dict:
        if pipeline_id not in self.pipelines:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Pipeline {pipeline_id} does not exist.")
        return self.pipelines[pipeline_id]

    def _latest(self, pipeline_id: str) -> list[dict]:
        updates = self.pipelines[pipeline_id]["updates"]
        return [{"update_id": u["update_id"], "state": u["state"], "creation_time": _iso(u["created"])}
                for u in reversed(updates)]

    def list_pipelines(self, query: dict, body: dict):
        match = re.fullmatch(r"name LIKE '(.*)'", query.get("filter", "name LIKE '%'"))
        if not match:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Unsupported filter: {query.get('filter')}")
        pattern = re.compile(
            "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in match.group(1).replace("''", "'")),
            re.DOTALL,
        )
        statuses = [{"pipeline_id": pid, "name": p["name"], "state": "IDLE", "latest_updates": self._latest(pid)}
                    for pid, p in self.pipelines.items() if pattern.fullmatch(p["name"])]
        return {"statuses": statuses} if statuses else {}

    def get_pipeline(self, pipeline_id: str, query: dict, body: dict):
        pipeline = self._pipeline(pipeline_id)
        return {"pipeline_id": pipeline_id, "name": pipeline["name"], "state": "IDLE",
                "latest_updates": self._latest(pipeline_id)}

    def start_update(self, pipeline_id: str, query: dict, body: dict):
        pipeline = self._pipeline(pipeline_id)
        unknown = set(body) - START_FIELDS
        if unknown:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Unknown fields: {sorted(unknown)}")
        if body.get("cause") is not None and body["cause"] not in CAUSES:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Invalid cause {body['cause']}")
        selected = body.get("full_refresh_selection", []) + body.get("refresh_selection", [])
        missing = [t for t in selected if t not in pipeline["flows"]]
        if missing:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Tables not in the pipeline: {missing}")
        update = {"update_id": str(uuid.uuid4()), "state": "QUEUED", "step": 0, "created": self._tick(),
                  "flows": selected or list(pipeline["flows"]), **body}
        pipeline["updates"].append(update)
        self._event(pipeline_id, update, "create_update", "INFO",
                    f"Update {update['update_id'][:6]} started by API_CALL.", {"create_update": {"cause": "API_CALL"}})
        return {"update_id": update["update_id"]}

    def get_update(self, pipeline_id: str, update_id: str, query: dict, body: dict):
        pipeline = self._pipeline(pipeline_id)
        update = next((u for u in pipeline["updates"] if u["update_id"] == update_id), None)
        if update is None:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Update {update_id} does not exist.")
        self._advance(pipeline_id, pipeline, update)
        info = {"pipeline_id": pipeline_id, "update_id": update_id, "state": update["state"],
                "cause": update.get("cause", "API_CALL"), "creation_time": int(update["created"].timestamp() * 1000)}
        for key in ("full_refresh", "full_refresh_selection", "refresh_selection", "validate_only"):
            if key in update:
                info[key] = update[key]
        return {"update": info}

    def _advance(self, pipeline_id: str, pipeline: dict, update: dict) -> None:
        """One step of a triggered update per poll: its states, then each flow's progress."""
        if update["state"] in {"COMPLETED", "FAILED", "CANCELED"}:
            return
        step = update["step"]
        update["step"] += 1
        if step < len(UPDATE_STEPS):
            self._set_state(pipeline_id, update, UPDATE_STEPS[step])
            return
        if pipeline["stuck"]:
            return
        flow_index, flow_step = divmod(step - len(UPDATE_STEPS), len(FLOW_STEPS) + 1)
        if flow_index < len(update["flows"]):
            flow = update["flows"][flow_index]
            if flow_step < len(FLOW_STEPS):
                self._flow_event(pipeline_id, update, flow, FLOW_STEPS[flow_step])
            elif flow == pipeline["fail_flow"]:
                self._flow_event(pipeline_id, update, flow, "FAILED",
                                 error="[TABLE_OR_VIEW_NOT_FOUND] The table `bronze`.`nope` cannot be found.")
                self._set_state(pipeline_id, update, "FAILED", level="ERROR")
            else:
                self._flow_event(pipeline_id, update, flow, "COMPLETED", rows=100 * (flow_index + 1))
            return
        self._set_state(pipeline_id, update, "COMPLETED")

    def _set_state(self, pipeline_id: str, update: dict, state: str, level: str = "INFO") -> None:
        update["state"] = state
        self._event(pipeline_id, update, "update_progress", level, f"Update {update['update_id'][:6]} is {state}.",
                    {"update_progress": {"state": state}})

    def _flow_event(self, pipeline_id: str, update: dict, flow: str, status: str, rows: int | None = None,
                    error: str | None = None) -> None:
        details: dict = {"flow_progress": {"status": status}}
        if rows is not None:
            details["flow_progress"]["metrics"] = {"num_output_rows": rows}
            details["flow_progress"]["data_quality"] = {"dropped_records": 0, "expectations": []}
        message = f"Flow '{flow}' has {status}." if status in {"COMPLETED", "FAILED"} else f"Flow '{flow}' is {status}."
        event = self._event(pipeline_id, update, "flow_progress", "ERROR" if error else "INFO", message, details,
                            flow=flow)
        if error:
            event["error"] = {"fatal": False, "exceptions": [{"class_name": "AnalysisException", "message": error}]}

    def _event(self, pipeline_id: str, update: dict, event_type: str, level: str, message: str, details: dict,
               flow: str | None = None) -> dict:
        pipeline = self.pipelines[pipeline_id]
        origin = {"cloud": "AWS", "region": "us-west-2", "pipeline_id": pipeline_id, "pipeline_name": pipeline["name"],
                  "update_id": update["update_id"]}
        if flow:
            origin.update(flow_name=flow, dataset_name=flow, flow_id=str(uuid.uuid5(uuid.NAMESPACE_URL, flow)))
        event = {"id": str(uuid.uuid4()), "sequence": {"control_plane_seq_no": next(self._ids)}, "origin": origin,
                 "timestamp": _iso(self._tick()), "message": message, "level": level,
                 "maturity_level": "STABLE", "event_type": event_type}
        if self.with_details:
            event["details"] = details
        pipeline["events"].append(event)
        return event

    def list_events(self, pipeline_id: str, query: dict, body: dict):
        pipeline = self._pipeline(pipeline_id)
        if "page_token" in query:
            extra = set(query) - {"page_token", "max_results"}
            if extra:
                raise ApiError(400, "INVALID_PARAMETER_VALUE",
                               f"page_token is mutually exclusive with all fields except max_results: {sorted(extra)}")
            token = json.loads(query["page_token"])
            order, conditions, offset = token["order"], token["conditions"], token["offset"]
        else:
            order = (query.get("order_by") or ["timestamp desc"])[0]
            if order not in {"timestamp asc", "timestamp desc"}:
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Invalid order_by: {order}")
            conditions, offset = _event_filter(query.get("filter")), 0
        max_results = int(query.get("max_results", 25))
        if max_results > 1000:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "max_results must be <= 1000")
        matched = [e for e in pipeline["events"] if all(_holds(e, c) for c in conditions)]
        matched.sort(key=lambda e: e["timestamp"], reverse=order.endswith("desc"))
        size = min(max_results, self.events_page_cap)  # "the system may return fewer than max_results"
        page = matched[offset:offset + size]
        response: dict = {"events": page}
        if offset + size < len(matched):
            response["next_page_token"] = json.dumps({"order": order, "conditions": conditions,
                                                      "offset": offset + size})
        return response

    # -- statements ---------------------------------------------------------------------------
    def execute_statement(self, query: dict, body: dict):
        for required in ("statement", "warehouse_id"):
            if not body.get(required):
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"{required} is required")
        if body["warehouse_id"] != WAREHOUSE:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Warehouse {body['warehouse_id']} does not exist.")
        wait = re.fullmatch(r"(\d+)s", body.get("wait_timeout", "10s"))
        if not wait or not (int(wait.group(1)) == 0 or 5 <= int(wait.group(1)) <= 50):
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "wait_timeout must be 0s or between 5s and 50s")
        if body.get("disposition", "INLINE") != "INLINE" or body.get("format", "JSON_ARRAY") != "JSON_ARRAY":
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "this workspace serves INLINE JSON_ARRAY only")
        statement_id = f"01f0{uuid.uuid4().hex[:28]}"
        self.statements[statement_id] = {"body": body, "polls": 0, "state": "PENDING"}
        # As if wait_timeout elapsed with on_wait_timeout=CONTINUE: the client polls.
        return {"statement_id": statement_id, "status": {"state": "PENDING"}}

    def get_statement(self, statement_id: str, query: dict, body: dict):
        statement = self._statement(statement_id)
        statement["polls"] += 1
        if statement["state"] == "PENDING":
            statement["state"] = "RUNNING"
            return {"statement_id": statement_id, "status": {"state": "RUNNING"}}
        if statement["state"] == "CANCELED":
            return {"statement_id": statement_id, "status": {"state": "CANCELED"}}
        return self._run(statement_id, statement)

    def _run(self, statement_id: str, statement: dict):
        sql, catalog = statement["body"]["statement"], statement["body"].get("catalog")
        match = re.fullmatch(r"SELECT \* FROM ([\w.]+)", sql.strip())
        parts = match.group(1).split(".") if match else []
        name = ".".join([catalog or "hive_metastore", *parts] if len(parts) == 2 else parts)
        if name not in self.tables:
            shown = ".".join(f"`{p}`" for p in name.split("."))
            return {"statement_id": statement_id, "status": {
                "state": "FAILED", "sql_state": "42P01",
                "error": {"error_code": "BAD_REQUEST",
                          "message": f"[TABLE_OR_VIEW_NOT_FOUND] The table or view {shown} cannot be found."}}}
        columns, rows = self.tables[name]
        limit = statement["body"].get("row_limit")
        truncated = limit is not None and len(rows) > limit
        rows = rows[:limit] if limit is not None else rows
        statement.update(state="SUCCEEDED", rows=[[None if v is None else str(v) for v in r] for r in rows])
        chunks = [{"chunk_index": i, "row_offset": i * self.chunk_rows,
                   "row_count": len(rows[i * self.chunk_rows:(i + 1) * self.chunk_rows])}
                  for i in range(max(1, -(-len(rows) // self.chunk_rows)))]
        manifest = {"format": "JSON_ARRAY", "schema": {"column_count": len(columns), "columns": [
            {"name": c, "position": i, "type_name": t, "type_text": t.lower()} for i, (c, t) in enumerate(columns)]},
            "total_chunk_count": len(chunks), "chunks": chunks, "total_row_count": len(rows), "truncated": truncated}
        return {"statement_id": statement_id, "status": {"state": "SUCCEEDED"}, "manifest": manifest,
                "result": self._chunk(statement, 0)}

    def _chunk(self, statement: dict, index: int) -> dict:
        rows = statement["rows"]
        part = rows[index * self.chunk_rows:(index + 1) * self.chunk_rows]
        chunk = {"chunk_index": index, "row_offset": index * self.chunk_rows, "row_count": len(part)}
        if part:
            chunk["data_array"] = part
        if (index + 1) * self.chunk_rows < len(rows):
            chunk["next_chunk_index"] = index + 1
            chunk["next_chunk_internal_link"] = f"/api/2.0/sql/statements/.../result/chunks/{index + 1}"
        return chunk

    def get_chunk(self, statement_id: str, index: str, query: dict, body: dict):
        statement = self._statement(statement_id)
        if statement["state"] != "SUCCEEDED":
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "result not available")
        return self._chunk(statement, int(index))

    def cancel_statement(self, statement_id: str, query: dict, body: dict):
        self._statement(statement_id)["state"] = "CANCELED"
        return {}

    def _statement(self, statement_id: str) -> dict:
        if statement_id not in self.statements:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Statement {statement_id} does not exist.")
        return self.statements[statement_id]

    def _tick(self) -> datetime:
        self._clock += timedelta(milliseconds=1500)
        return self._clock


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _event_filter(text: str | None) -> list[list]:
    """The documented filters: level='X', level in ('X', ...), id='X', timestamp op 'T', joined by AND."""
    conditions = []
    for part in re.split(r"\s+AND\s+", text.strip(), flags=re.IGNORECASE) if text else []:
        if m := re.fullmatch(r"timestamp\s*(>=|<=|>|<|=)\s*'([^']+)'", part.strip()):
            conditions.append(["timestamp", m.group(1), m.group(2)])
        elif m := re.fullmatch(r"level\s*=\s*'(\w+)'", part.strip()):
            conditions.append(["level", "in", [m.group(1)]])
        elif m := re.fullmatch(r"level\s+in\s*\(([^)]*)\)", part.strip(), flags=re.IGNORECASE):
            conditions.append(["level", "in", re.findall(r"'(\w+)'", m.group(1))])
        elif m := re.fullmatch(r"id\s*=\s*'([^']+)'", part.strip()):
            conditions.append(["id", "=", m.group(1)])
        else:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Unsupported filter: {part}")
    return conditions


def _holds(event: dict, condition: list) -> bool:
    field, op, value = condition
    if op == "in":
        return event[field] in value
    ours, theirs = event[field], value
    if field == "timestamp":
        ours = datetime.fromisoformat(ours.replace("Z", "+00:00"))
        theirs = datetime.fromisoformat(theirs.replace("Z", "+00:00"))
    return {"=": ours == theirs, ">": ours > theirs, ">=": ours >= theirs, "<": ours < theirs,
            "<=": ours <= theirs}[op]


# ------------------------------------------------------------------------------------ fixtures

FLOWS = ["bronze.shop_binlog_events", "bronze.shop_sessions", "gold.landing_summary"]
DEV_NAME = "[dev alice] cdc-lakehouse-dev"


@pytest.fixture
def workspace():
    ws = LocalWorkspace()
    ws.thread.start()
    yield ws
    ws.server.shutdown()
    ws.server.server_close()


@pytest.fixture
def w(workspace) -> WorkspaceClient:
    return WorkspaceClient(host=workspace.host, token=TOKEN)


@pytest.fixture
def cli_env(workspace, monkeypatch, tmp_path):
    """The CLI authenticates from the environment, as in CI: DATABRICKS_HOST + DATABRICKS_TOKEN."""
    for name in ("DATABRICKS_CONFIG_PROFILE", "DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET",
                 "DATABRICKS_AUTH_TYPE", "DATABRICKS_WAREHOUSE_ID", "CDC_LAKEHOUSE_PIPELINE",
                 "CDC_LAKEHOUSE_CATALOG", "DATABRICKS_ACCOUNT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABRICKS_HOST", workspace.host)
    monkeypatch.setenv("DATABRICKS_TOKEN", TOKEN)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "no.databrickscfg"))
    return workspace


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="cdc-lakehouse")
    add_remote_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def follow(w, pipeline_id, update_id, **kwargs):
    lines: list[str] = []
    result = pipelines.follow_update(w, pipeline_id, update_id, out=lines.append, poll_seconds=0,
                                     sleep=lambda s: None, **kwargs)
    return result, "\n".join(lines)


# --------------------------------------------------------------------------------- pipelines


def test_resolve_pipeline_by_id_name_and_dev_prefix(workspace, w):
    dev = workspace.add_pipeline(DEV_NAME, FLOWS)
    prod = workspace.add_pipeline("cdc-lakehouse-prod", FLOWS)
    assert pipelines.resolve_pipeline(w, prod) == prod
    assert workspace.requests == []  # an id needs no lookup
    assert pipelines.resolve_pipeline(w, "cdc-lakehouse-prod") == prod
    assert pipelines.resolve_pipeline(w, "cdc-lakehouse-dev") == dev  # "[dev alice] " left out
    assert pipelines.resolve_pipeline(w, DEV_NAME) == dev
    assert workspace.calls("GET", "/api/2.0/pipelines")[0]["query"] == {"filter": "name LIKE '%cdc-lakehouse-prod%'"}


def test_resolve_pipeline_ambiguous_or_missing(workspace, w):
    workspace.add_pipeline(DEV_NAME, FLOWS)
    workspace.add_pipeline("[dev bob] cdc-lakehouse-dev", FLOWS)
    with pytest.raises(pipelines.RemoteError, match=r"matches several pipelines: .*\[dev alice\].*\[dev bob\]"):
        pipelines.resolve_pipeline(w, "cdc-lakehouse-dev")
    with pytest.raises(pipelines.RemoteError, match="no pipeline named like 'cdc-lakehouse-qa'"):
        pipelines.resolve_pipeline(w, "cdc-lakehouse-qa")


def test_start_update_of_the_whole_pipeline(workspace, w):
    pipeline_id = workspace.add_pipeline(DEV_NAME, FLOWS)
    update_id = pipelines.start_update(w, pipeline_id)
    (call,) = workspace.calls("POST", f"/api/2.0/pipelines/{pipeline_id}/updates")
    assert call["body"] == {"cause": "API_CALL"}  # no selection: a full graph update
    assert workspace.pipelines[pipeline_id]["updates"][0]["update_id"] == update_id
    assert pipelines.latest_update_id(w, pipeline_id) == update_id


def test_start_update_with_full_refresh_of_chosen_tables(workspace, w):
    pipeline_id = workspace.add_pipeline(DEV_NAME, FLOWS)
    update_id = pipelines.start_update(w, pipeline_id, full_refresh_tables=["bronze.shop_sessions"],
                                       refresh_tables=["gold.landing_summary"])
    (call,) = workspace.calls("POST", f"/api/2.0/pipelines/{pipeline_id}/updates")
    assert call["body"] == {"cause": "API_CALL", "full_refresh_selection": ["bronze.shop_sessions"],
                            "refresh_selection": ["gold.landing_summary"]}
    update = w.pipelines.get_update(pipeline_id, update_id).update
    assert update.full_refresh_selection == ["bronze.shop_sessions"]
    assert update.refresh_selection == ["gold.landing_summary"]


def test_start_update_rejects_contradictions_before_any_request(workspace, w):
    pipeline_id = workspace.add_pipeline(DEV_NAME, FLOWS)
    with pytest.raises(pipelines.RemoteError, match="do not combine"):
        pipelines.start_update(w, pipeline_id, full_refresh=True, full_refresh_tables=["gold.landing_summary"])
    with pytest.raises(pipelines.RemoteError, match="both fully refreshed and refreshed: gold.landing_summary"):
        pipelines.start_update(w, pipeline_id, full_refresh_tables=["gold.landing_summary"],
                               refresh_tables=["gold.landing_summary"])
    assert workspace.calls("POST", r".*/updates") == []


def test_workspace_errors_surface_as_sdk_errors(workspace, w):
    from databricks.sdk.errors import InvalidParameterValue, NotFound

    pipeline_id = workspace.add_pipeline(DEV_NAME, FLOWS)
    with pytest.raises(NotFound, match="does not exist"):
        pipelines.start_update(w, str(uuid.uuid4()))
    with pytest.raises(InvalidParameterValue, match=r"Tables not in the pipeline: \['silver.nope'\]"):
        pipelines.start_update(w, pipeline_id, full_refresh_tables=["silver.nope"])


# ------------------------------------------------------------------------------------ follow


def test_follow_prints_the_update_until_it_completes(workspace, w):
    pipeline_id = workspace.add_pipeline(DEV_NAME, FLOWS)
    older = pipelines.start_update(w, pipeline_id, refresh_tables=["bronze.shop_sessions"])
    follow(w, pipeline_id, older)  # an earlier update: its events must not show below
    update_id = pipelines.start_update(w, pipeline_id)

    result, output = follow(w, pipeline_id, update_id)

    assert result.ok and result.state == "COMPLETED"
    assert result.flows == {flow: "COMPLETED" for flow in FLOWS}
    assert result.errors == []
    assert "bronze.shop_binlog_events: COMPLETED (rows=100, dropped=0)" in output
    assert "gold.landing_summary: COMPLETED (rows=300, dropped=0)" in output
    states = re.findall(r"update_progress\s+Update \w+ is (\w+)\.", output)
    assert states == [*UPDATE_STEPS, "COMPLETED"]
    assert output.count("flow_progress") == len(FLOWS) * (len(FLOW_STEPS) + 1)
    assert older[:6] not in output  # events of the other update are skipped
    mine = [e for e in workspace.pipelines[pipeline_id]["events"] if e["origin"]["update_id"] == update_id]
    assert result.events == len(mine)

    # Following the finished update again reads its events at once, over several pages.
    again, output_again = follow(w, pipeline_id, update_id)
    event_lines = re.compile(r"^\d\d:\d\d:\d\d ", re.MULTILINE)
    assert again.events == len(mine)
    assert [line for line in output_again.splitlines() if event_lines.match(line)] == [
        line for line in output.splitlines() if event_lines.match(line)]
    event_calls = workspace.calls("GET", rf"/api/2.0/pipelines/{pipeline_id}/events")
    assert any("page_token" in c["query"] for c in event_calls)
    assert all(set(c["query"]) <= {"page_token", "max_results"} for c in event_calls if "page_token" in c["query"])
    assert all(c["query"]["order_by"] == ["timestamp asc"] for c in event_calls if "page_token" not in c["query"])


def test_follow_reports_a_failed_flow(workspace, w):
    pipeline_id = workspace.add_pipeline(DEV_NAME, FLOWS, fail_flow="bronze.shop_sessions")
    update_id = pipelines.start_update(w, pipeline_id)
    result, output = follow(w, pipeline_id, update_id)
    assert not result.ok and result.state == "FAILED"
    assert result.flows == {"bronze.shop_binlog_events": "COMPLETED", "bronze.shop_sessions": "FAILED"}
    assert "[TABLE_OR_VIEW_NOT_FOUND] The table `bronze`.`nope` cannot be found." in output
    assert any("has FAILED" in e or "is FAILED" in e for e in result.errors)
    summary = "\n".join(pipelines.summary_lines(result))
    assert f"update {update_id}: FAILED" in summary
    assert re.search(r"bronze\.shop_sessions\s+FAILED", summary)


def test_follow_needs_only_the_documented_event_fields(workspace, w):
    """Without `details` (not part of the REST reference) the messages still tell the story."""
    workspace.with_details = False
    pipeline_id = workspace.add_pipeline(DEV_NAME, FLOWS)
    update_id = pipelines.start_update(w, pipeline_id)
    result, output = follow(w, pipeline_id, update_id)
    assert result.ok and result.flows == {}
    assert "Flow 'gold.landing_summary' has COMPLETED." in output


def test_follow_gives_up_after_the_timeout_without_stopping_the_update(workspace, w):
    pipeline_id = workspace.add_pipeline(DEV_NAME, FLOWS, stuck=True)
    update_id = pipelines.start_update(w, pipeline_id)
    result, output = follow(w, pipeline_id, update_id, timeout_seconds=0.2)
    assert result.state == "RUNNING" and not result.ok
    assert "stopped following (the update goes on)" in output
    assert workspace.calls("POST", r".*/stop") == []


# ------------------------------------------------------------------------------------ health


def add_landing_summary(workspace, catalog="cdc_dev"):
    workspace.add_table(
        f"{catalog}.gold.landing_summary",
        [("source", "STRING"), ("bronze_table", "STRING"), ("rows", "LONG"), ("files", "LONG")],
        [["shop", "bronze.shop_binlog_events", 1394, 3], ["shop", "bronze.shop_sessions", 28, 1],
         ["shop_pg", "bronze.shop_pg_shadow_transactions", 285, 3], ["shop_pg", "bronze.shop_pg_shadow_shop_orders", 237, 3],
         ["shop_pg", "bronze.shop_pg_shadow_shop_products", None, 3]],
    )


def test_health_reads_every_chunk_through_the_warehouse(workspace, w):
    add_landing_summary(workspace)
    result = health.health_summary(w, WAREHOUSE, "cdc_dev", "gold.landing_summary", poll_seconds=0,
                                   sleep=lambda s: None)
    assert result.columns == ["source", "bronze_table", "rows", "files"]
    assert len(result.rows) == 5  # three chunks of two rows
    assert result.records()[0] == {"source": "shop", "bronze_table": "bronze.shop_binlog_events",
                                   "rows": 1394, "files": 3}
    assert result.records()[-1]["rows"] is None
    (call,) = workspace.calls("POST", "/api/2.0/sql/statements")
    assert call["body"] == {"statement": "SELECT * FROM gold.landing_summary", "warehouse_id": WAREHOUSE,
                            "catalog": "cdc_dev", "row_limit": 1000, "disposition": "INLINE",
                            "format": "JSON_ARRAY", "wait_timeout": "30s", "on_wait_timeout": "CONTINUE"}
    assert len(workspace.calls("GET", r"/api/2.0/sql/statements/[^/]+/result/chunks/\d+")) == 2


def test_health_reports_a_failed_statement(workspace, w):
    with pytest.raises(health.StatementFailed, match=r"FAILED: BAD_REQUEST \[TABLE_OR_VIEW_NOT_FOUND\]"):
        health.health_summary(w, WAREHOUSE, "cdc_prod", poll_seconds=0, sleep=lambda s: None)


def test_health_rejects_what_is_not_a_table_name(workspace, w):
    with pytest.raises(ValueError, match="not a table name"):
        health.health_summary(w, WAREHOUSE, "cdc_dev", "gold.x; DROP TABLE y")
    assert workspace.requests == []


def test_health_cancels_a_statement_that_outlives_the_timeout(workspace, w):
    add_landing_summary(workspace)
    with pytest.raises(health.StatementFailed, match="canceled"):
        health.health_summary(w, WAREHOUSE, "cdc_dev", "gold.landing_summary", timeout_seconds=0, poll_seconds=0,
                              sleep=lambda s: None)
    assert len(workspace.calls("POST", r"/api/2.0/sql/statements/[^/]+/cancel")) == 1


# --------------------------------------------------------------------------------------- CLI


def test_cli_start_follow_and_health(cli_env, capsys):
    workspace = cli_env
    pipeline_id = workspace.add_pipeline(DEV_NAME, FLOWS)
    add_landing_summary(workspace)

    code = run_cli("remote", "start", "--full-refresh-table", "bronze.shop_sessions", "--follow",
                   "--poll-seconds", "0")
    out = capsys.readouterr().out
    assert code == 0, out
    update_id = workspace.pipelines[pipeline_id]["updates"][0]["update_id"]
    assert f"started update {update_id} of pipeline {pipeline_id}" in out
    assert "bronze.shop_sessions: COMPLETED" in out and f"update {update_id}: COMPLETED" in out

    assert run_cli("remote", "follow", "--pipeline", pipeline_id, "--json", "--poll-seconds", "0") == 0
    captured = capsys.readouterr()
    events = [json.loads(line) for line in captured.out.splitlines()[1:]]
    assert {e["origin"]["update_id"] for e in events} == {update_id}
    assert f"update {update_id}: COMPLETED" in captured.err

    assert run_cli("remote", "health", "--warehouse-id", WAREHOUSE, "--catalog", "cdc_dev", "--json",
                   "--table", "gold.landing_summary", "--poll-seconds", "0") == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["bronze_table"] for r in rows][:2] == ["bronze.shop_binlog_events", "bronze.shop_sessions"]

    assert run_cli("remote", "health", "--warehouse-id", WAREHOUSE, "--catalog", "cdc_dev",
                   "--table", "gold.landing_summary", "--poll-seconds", "0") == 0
    assert "bronze.shop_pg_shadow_transactions" in capsys.readouterr().out


def test_cli_failures_are_one_line_and_exit_codes(cli_env, capsys, monkeypatch):
    workspace = cli_env
    workspace.add_pipeline(DEV_NAME, FLOWS, fail_flow="gold.landing_summary")
    assert run_cli("remote", "start", "--follow", "--poll-seconds", "0") == 1  # the update failed
    capsys.readouterr()

    assert run_cli("remote", "health", "--warehouse-id", WAREHOUSE, "--catalog", "nowhere", "--poll-seconds", "0") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: statement FAILED: BAD_REQUEST [TABLE_OR_VIEW_NOT_FOUND]") and err.count("\n") == 1

    assert run_cli("remote", "health", "--catalog", "cdc_dev") == 2
    assert "--warehouse-id is required" in capsys.readouterr().err

    monkeypatch.setenv("DATABRICKS_TOKEN", "wrong")
    assert run_cli("remote", "follow") == 2
    assert "Invalid access token" in capsys.readouterr().err


def test_health_reads_the_gold_replication_health_table_by_default(workspace, w):
    workspace.add_table("cdc_dev.gold.replication_health", [("source", "STRING"), ("lag_seconds", "LONG")],
                        [["shop", 3]])
    result = health.health_summary(w, WAREHOUSE, "cdc_dev", poll_seconds=0, sleep=lambda s: None)
    assert result.records() == [{"source": "shop", "lag_seconds": 3}]


def test_resolve_pipeline_leaves_out_only_the_dev_prefix(workspace, w):
    """A name that merely ends like another ("dev") or an empty one never picks a pipeline."""
    workspace.add_pipeline(DEV_NAME, FLOWS)
    with pytest.raises(pipelines.RemoteError, match="no pipeline named like 'dev'"):
        pipelines.resolve_pipeline(w, "dev")
    with pytest.raises(pipelines.RemoteError, match="no pipeline given"):
        pipelines.resolve_pipeline(w, "")


def test_cli_health_reads_the_targets_gold_schema(cli_env, capsys):
    """A dev deployment's gold schema is dev_<user>_gold (resources/cdc_lakehouse.catalog.yml)."""
    cli_env.add_table("cdc_dev.dev_alice_gold.replication_health", [("source", "STRING"), ("held", "LONG")],
                      [["shop", 0]])
    assert run_cli("remote", "health", "--warehouse-id", WAREHOUSE, "--catalog", "cdc_dev",
                   "--gold-schema", "dev_alice_gold", "--json", "--poll-seconds", "0") == 0
    assert json.loads(capsys.readouterr().out) == [{"source": "shop", "held": 0}]
    assert run_cli("remote", "health", "--warehouse-id", WAREHOUSE, "--catalog", "cdc_dev",
                   "--poll-seconds", "0") == 2  # prod's gold.replication_health is not dev's
    assert "TABLE_OR_VIEW_NOT_FOUND" in capsys.readouterr().err
