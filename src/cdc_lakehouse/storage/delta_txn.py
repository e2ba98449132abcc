"""A write committed through delta-spark's own transaction, without rebuilding the table's state.

``DataFrameWriter.save`` with ``txnAppId``/``txnVersion`` asks the transaction for the writer's
app version (``OptimisticTransaction.txnVersion``), which Delta answers from the snapshot's whole
state: three Spark jobs that rebuild it from the log on every commit, about 1.3 s on two cores
where the write itself is one job and 0.5 s. An overwrite also rebuilds it to list the files it
removes. The store already knows both from the version's checksum file (``delta_log``), so a
write the checksum can answer for runs the steps ``WriteIntoDelta`` runs, minus those two
lookups: a transaction (``DeltaLog.startTransaction``), its data files (``writeFiles``), the
removed files and the app transaction as actions, one commit.

What stays Delta's: the files, their statistics, constraints, column mapping, the commit and its
conflict checks, the checksum and checkpoint after it. The app id is registered as read
(``readTxn``), so a racing commit of the same writer's batch fails this one as Delta's own check
does (``ConcurrentTransactionException``), and an overwrite registers the whole table as read, so
it conflicts with any write that lands while it runs.
"""

from __future__ import annotations

import json
import time

from pyspark.sql import DataFrame, SparkSession

from cdc_lakehouse.storage.base import Commit


class DeltaTransactions:
    """Transactions on the Delta tables of one Spark session."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        delta = jvm.org.apache.spark.sql.delta
        # Each step of a JVM name is a py4j round trip: looked up once.
        self._log_class = delta.DeltaLog
        self.action = delta.actions.Action
        self.write_operation = getattr(delta, "DeltaOperations$Write")
        self.save_modes = jvm.org.apache.spark.sql.SaveMode
        self.none = getattr(getattr(jvm.scala, "None$"), "MODULE$")
        self.some = jvm.scala.Option

    def start(self, uri: str) -> "OpenTransaction":
        """A transaction on the table at ``uri``, reading its newest version."""
        return OpenTransaction(self, self._log_class.forTable(self.spark._jsparkSession, uri).startTransaction())


class OpenTransaction:
    def __init__(self, transactions: DeltaTransactions, txn):
        self._of = transactions
        self._txn = txn
        self.read_version = int(txn.readVersion())

    def read_whole_table(self) -> None:
        """Registers every row of the version read as read: a write that lands before this
        transaction commits fails it."""
        self._txn.readWholeTable()

    def write(self, df: DataFrame, overwrite: bool, removed: list[dict], commit: Commit | None, token: str) -> int:
        """Append ``df`` (with ``overwrite``: in place of the files ``removed``, the ``add``
        entries of every file of the version read) in one commit carrying ``commit``'s app
        transaction and ``token`` as its user metadata; returns the version committed."""
        of, txn = self._of, self._txn
        if overwrite:
            self.read_whole_table()
        if commit is not None:
            txn.readTxn().addOne(commit.app_id)
        actions = txn.writeFiles(df._jdf)
        for add in removed:
            actions = actions.appended(of.action.fromJson(json.dumps({"add": add})).remove())
        if commit is not None:
            app = {"appId": commit.app_id, "version": commit.version, "lastUpdated": int(time.time() * 1000)}
            actions = actions.appended(of.action.fromJson(json.dumps({"txn": app})))
        mode = of.save_modes.Overwrite if overwrite else of.save_modes.Append
        none = of.none
        operation = of.write_operation(mode, none, none, of.some.apply(token), none, none, none, none, none)
        return int(txn.commit(actions, operation))
