from pyspark import pipelines as dp


@dp.materialized_view(name="gold.a")
def a():
    return spark.read.table("silver.does_not_exist")
