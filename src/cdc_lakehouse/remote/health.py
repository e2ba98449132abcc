"""The gold health summary, read through a SQL warehouse with the Statement Execution API.

* ``POST /api/2.0/sql/statements``                                   ``execute_statement``
* ``GET  /api/2.0/sql/statements/{id}``                              ``get_statement``
* ``GET  /api/2.0/sql/statements/{id}/result/chunks/{chunk_index}``  ``get_statement_result_chunk_n``
* ``POST /api/2.0/sql/statements/{id}/cancel``                       ``cancel_execution``

Results are requested ``INLINE`` as ``JSON_ARRAY`` (every value a string or null, typed by the
manifest's schema), following ``next_chunk_index`` until the last chunk.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable

from databricks.sdk import WorkspaceClient
from databricks.sdk.service.sql import (
    Disposition,
    ExecuteStatementRequestOnWaitTimeout,
    Format,
    StatementState,
)

# The table `remote health` prints by default: one row per source with replication lag, held
# transactions, quarantined lines and anomalies (src/gold/health.py, docs/gold.md).
HEALTH_TABLE = "replication_health"  # in the target's gold schema
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")
WAIT = "30s"  # the documented range is 5s..50s (or 0s: return at once)
RUNNING = frozenset({StatementState.PENDING, StatementState.RUNNING})


class StatementFailed(RuntimeError):
    pass


@dataclass
class QueryResult:
    statement_id: str
    columns: list[str]
    types: list[str]
    rows: list[list[str | None]]

    def records(self) -> list[dict]:
        return [dict(zip(self.columns, (_typed(v, t) for v, t in zip(row, self.types)))) for row in self.rows]


def run_statement(
    w: WorkspaceClient,
    warehouse_id: str,
    statement: str,
    *,
    catalog: str | None = None,
    schema: str | None = None,
    row_limit: int | None = None,
    timeout_seconds: float = 600,
    poll_seconds: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> QueryResult:
    """Run one statement on the warehouse and return every row (all chunks)."""
    response = w.statement_execution.execute_statement(
        statement=statement,
        warehouse_id=warehouse_id,
        catalog=catalog,
        schema=schema,
        row_limit=row_limit,
        disposition=Disposition.INLINE,
        format=Format.JSON_ARRAY,
        wait_timeout=WAIT,
        on_wait_timeout=ExecuteStatementRequestOnWaitTimeout.CONTINUE,
    )
    statement_id = response.statement_id
    started = time.monotonic()
    while response.status is not None and response.status.state in RUNNING:
        if time.monotonic() - started > timeout_seconds:
            w.statement_execution.cancel_execution(statement_id)
            raise StatementFailed(f"statement {statement_id} still {response.status.state.value} "
                                  f"after {timeout_seconds:.0f}s: canceled")
        sleep(poll_seconds)
        response = w.statement_execution.get_statement(statement_id)
    state = response.status.state if response.status else None
    if state != StatementState.SUCCEEDED:
        error = response.status.error if response.status else None
        detail = f"{error.error_code.value if error and error.error_code else ''} {error.message if error else ''}".strip()
        raise StatementFailed(f"statement {state.value if state else '?'}: {detail or 'no error message'}")
    schema_info = response.manifest.schema if response.manifest else None
    columns = (schema_info.columns if schema_info else None) or []
    result = response.result
    rows: list[list] = list(result.data_array or []) if result else []
    next_chunk = result.next_chunk_index if result else None
    while next_chunk is not None:
        chunk = w.statement_execution.get_statement_result_chunk_n(statement_id, next_chunk)
        rows.extend(chunk.data_array or [])
        next_chunk = chunk.next_chunk_index
    return QueryResult(
        statement_id,
        [c.name for c in columns],
        [c.type_name.value if c.type_name else "STRING" for c in columns],
        rows,
    )


def health_summary(
    w: WorkspaceClient,
    warehouse_id: str,
    catalog: str,
    table: str = f"gold.{HEALTH_TABLE}",
    *,
    limit: int = 1000,
    **kwargs,
) -> QueryResult:
    """``SELECT *`` from the health table, in ``catalog`` (the bundle's ``catalog`` variable)."""
    if not TABLE_NAME.match(table):
        raise ValueError(f"not a table name: {table!r} (expected [catalog.]schema.table)")
    return run_statement(w, warehouse_id, f"SELECT * FROM {table}", catalog=catalog, row_limit=limit, **kwargs)


def _typed(value: str | None, type_name: str):
    """JSON_ARRAY values arrive as strings; give numbers and booleans their type."""
    if value is None:
        return None
    try:
        if type_name in {"BYTE", "SHORT", "INT", "LONG"}:
            return int(value)
        if type_name in {"FLOAT", "DOUBLE"}:
            return float(value)
        if type_name == "BOOLEAN":
            return value.lower() == "true"
    except ValueError:
        return value
    return value
