"""What a user's own pytest looks like (README "Testing your own code"): a SparkSession with
delta-spark, ``cdc-lakehouse run`` on a lake, then the replicas read as any Delta table is,
with ``DeltaTable.forPath``, ``spark.read.format("delta")`` and a streaming read of a replica's
Change Data Feed."""

from __future__ import annotations

from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cli import main
from cdc_lakehouse.runtime.session import delta_jars, with_delta
from silver_support import onboarding_for

REPLICA = "gold/shop_orders"  # the coherent replica of shop.orders, <lake>/<schema>/<table>


def users_spark() -> SparkSession:
    """A user's session: delta-spark's extension and catalog, as configure_spark_with_delta_pip
    sets them (here from the jars `make install` put in the venv). The suite has one session, so
    this returns it."""
    return with_delta(SparkSession.builder.master("local[2]"), delta_jars()).getOrCreate()


def test_a_user_reads_and_streams_a_replica_the_pipeline_wrote(spark, tmp_path: Path):
    # `spark`: the suite's session exists first, so that the user's builder returns it even when
    # this test runs alone (a session it made would keep Python workers without the venv's
    # pyarrow for every later test of the run).
    spark = users_spark()
    lake = tmp_path / "lake"
    # The demo's landing; of its onboarding, the one replica read here.
    assert main(["run", "--lake", str(lake), "--config", str(onboarding_for(tmp_path, {"shop"}, {"orders"}))]) == 0

    replica = DeltaTable.forPath(spark, str(lake / REPLICA)).toDF()
    assert replica.count() > 0
    assertDataFrameEqual(spark.read.format("delta").load(str(lake / REPLICA)), replica)

    feed = (spark.readStream.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
            .load(str(lake / REPLICA)))
    query = (feed.writeStream.format("memory").queryName("shop_orders_feed")
             .option("checkpointLocation", str(tmp_path / "feed_checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    # The feed's net effect is the replica: every row inserted or last updated, none deleted since.
    latest = spark.sql("""
        SELECT * EXCEPT (_change_type, _commit_version, _commit_timestamp, _rank) FROM (
          SELECT *, row_number() OVER (PARTITION BY order_id ORDER BY _commit_version DESC,
                                       _change_type = 'update_postimage' DESC) AS _rank
          FROM shop_orders_feed WHERE _change_type != 'update_preimage')
        WHERE _rank = 1 AND _change_type != 'delete'""")
    assertDataFrameEqual(latest.select(*replica.columns), replica)
