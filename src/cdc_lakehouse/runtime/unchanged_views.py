"""Materialized views whose refresh would write what they already hold are kept as they are.

Databricks does not recompute a materialized view whose inputs did not change. Locally, a view
recomputed in full (not refreshed by partition) is kept when its refresh key is the one its last
refresh recorded and the view is still at the version that refresh wrote. The key covers what
the rows are a function of: the flow's definition (fingerprint.py), its query plan as analyzed
(the expressions, literals and types the code built, from the onboarding file for instance) and
the version of every table the query read, with the files it reads.

Rows a view builds in Python (``spark.createDataFrame``) enter the key only through the code and
configuration that make them: a view whose rows come from anywhere else (a folder listing, a
service) is not recomputed when only they change. Land such data in a table the view reads.

A plan that reads the clock (``current_timestamp``) or is not deterministic (``rand``, ``uuid``)
has no key: such a view is recomputed at every update that has work, as Databricks does (an
update with none is ended before any flow plans: quiet_update.py). The key is recorded only
once the view is written, so a run stopped in between recomputes it.

Planning the query to compute its key costs far more than the check itself (analysis infers the
schema of every JSON column the view parses, over all the rows it reads). So the record also
keeps the version of every table the view read, when those tables are all it read (every input
file lies in one of them): while the definition and those versions stay the same, the view is
kept before its query is even built (``quiet_before_planning``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from py4j.protocol import Py4JError
from pyspark.sql import DataFrame

from cdc_lakehouse.paths import local_path
from cdc_lakehouse.runtime.flow_batch import FlowBatch
from cdc_lakehouse.settings import EVENT_LOG_TABLE
import cdc_lakehouse.storage.spark_plans as spark_plans

# Catalyst expressions whose value is the time of the query: deterministic to Spark, not here.
_READS_CLOCK = re.compile(
    r'"class":"[\w.$]*\.(CurrentTimestamp|CurrentDate|CurrentTime|LocalTimestamp|Now|CurrentBatchTimestamp)"'
)
_EXPR_ID = re.compile(r'"id":(\d+),"jvmId":"[^"]*"')
# PySpark names the variable of a Python lambda (``F.transform(c, lambda x: ...)``) from a
# process-wide counter: ``x_76`` in one update is ``x_162`` in the next.
_LAMBDA_NAME = re.compile(r'("class":"[\w.]*NamedLambdaVariable","num-children":0,"name":)"([^"]*)"')


UNCHANGED = "inputs and definition unchanged since the last refresh"
_TABLE_ID = "table-id:"  # an input named by its Delta table id (_input_files): one of the read tables


@dataclass
class RefreshKey:
    batch: FlowBatch
    target: str
    value: str | None  # None: the view reads the clock, and is recomputed at every update with work
    inputs: dict[str, int] | None  # table -> version, when tables are all the view read

    def unchanged(self) -> bool:
        last = self.batch.checkpoint.refresh()
        same_key = self.value is not None and last.get("key") == self.value
        return same_key and last.get("version") == self.batch.store.version(self.target)

    def record(self) -> None:
        record = {"key": self.value, "version": self.batch.store.version(self.target)}
        if self.inputs is not None:
            record |= {"inputs": self.inputs, "definition": self.batch.definition}
        self.batch.checkpoint.write_refresh(record)


def quiet_before_planning(batch, target: str) -> bool:
    """Whether the last refresh of ``target`` read only tables, all still at the versions it
    read, under the same definition, and the view is as that refresh wrote it."""
    last = batch.checkpoint.refresh()
    return last.get("key") is not None and _inputs_as_read(batch, target, last, ())


def kept_in_a_quiet_update(batch, target: str) -> bool:
    """``quiet_before_planning`` for an update in which no flow has work (quiet_update.py):
    a view that reads the clock is kept too, and the event log is not compared."""
    return _inputs_as_read(batch, target, batch.checkpoint.refresh(), (EVENT_LOG_TABLE,))


def _inputs_as_read(batch, target: str, last: dict, ignored: tuple[str, ...]) -> bool:
    store, inputs = batch.store, last.get("inputs")
    if inputs is None or last.get("definition") != batch.definition:
        return False
    if last.get("version") != store.version(target):
        return False
    for name, version in inputs.items():
        if name in ignored:
            continue
        if name in batch.runner.graph.datasets:
            batch.runner.ensure(name)  # this update's writes to it first
        if not store.exists(name) or store.version(name) != version:
            return False
    return True


def refresh_key(batch, target: str, query: DataFrame) -> RefreshKey | None:
    """The key of a full refresh of ``target`` from ``query``; None when it cannot have one."""
    tables = sorted({name.removeprefix("read:") for name, _ in batch.reads if name.startswith("read:")})
    inputs = {name: batch.store.version(name) for name in tables if batch.store.exists(name)}
    try:
        plan = query._jdf.queryExecution().analyzed()
        text = None if not plan.deterministic() else _normalized(plan.toJSON())
        files = _input_files(batch, query, plan, inputs)
    except Py4JError:  # a plan Spark cannot describe: recomputed, as without a key
        return None
    if text is None:
        return None
    digest = hashlib.sha256(batch.definition.encode())
    digest.update(text.encode())
    digest.update(json.dumps([inputs, files], sort_keys=True).encode())
    value = None if _READS_CLOCK.search(text) else digest.hexdigest()
    return RefreshKey(batch, target, value, inputs if _only_tables(batch, inputs, files) else None)


def _input_files(batch, query: DataFrame, plan, inputs: dict[str, int]) -> list[str]:
    """What the query reads besides the tables' versions: a table made again (a full refresh)
    may come back to the same version with other rows. When every file the plan reads is a
    Delta table of ``inputs`` (the pipeline's reads), that is their table ids: found in the
    log, where listing the files of each version (``inputFiles``) rebuilt every table's state
    and planned the whole query (seconds per view on delta-spark)."""
    roots = _delta_roots(plan)
    folders = {str(batch.store.path(name).resolve()): name for name in inputs}
    if roots is not None and all(local_path(root) in folders for root in roots):
        return sorted(f"{_TABLE_ID}{name}@{batch.store.table_id(name)}" for name in (folders[local_path(r)] for r in roots))
    return sorted(query.inputFiles())


def _delta_roots(plan) -> list[str] | None:
    """The folders of the Delta tables the analyzed plan reads; None when it reads other files.
    Leaves that are not file relations (rows built in Python, ranges) read no file."""
    roots: list[str] = []
    for leaf in spark_plans.leaves(plan):
        if spark_plans.kind(leaf) != "LogicalRelation" or not _has_location(leaf.relation()):
            continue
        index = leaf.relation().location()
        if index.getClass().getSimpleName() != "TahoeLogFileIndex":
            return None
        paths = index.rootPaths().iterator()
        while paths.hasNext():
            roots.append(paths.next().toString())
    return roots


def _has_location(relation) -> bool:
    return relation.getClass().getSimpleName() == "HadoopFsRelation"


def _only_tables(batch, inputs: dict[str, int], files: list[str]) -> bool:
    """Whether every input is a table read through the pipeline, and every file one of theirs."""
    if any(not name.startswith("read:") for name, _ in batch.reads):
        return False
    folders = [f"{batch.store.path(name).resolve()}/" for name in inputs]
    return all(f.startswith(_TABLE_ID) or any(local_path(f).startswith(folder) for folder in folders) for f in files)


def _normalized(plan_json: str) -> str:
    """Expression ids and lambda variable names numbered in order of appearance: they differ
    from one session, or one update, to the next."""
    ids: dict[str, int] = {}
    names: dict[str, int] = {}
    text = _EXPR_ID.sub(lambda m: f'"id":{ids.setdefault(m.group(1), len(ids))}', plan_json)
    return _LAMBDA_NAME.sub(lambda m: f'{m.group(1)}"lambda_{names.setdefault(m.group(2), len(names))}"', text)
