from pyspark import pipelines as dp


@dp.materialized_view(name="gold.a")
def a():
    return spark.read.table("gold.b")


@dp.materialized_view(name="gold.b")
def b():
    return spark.read.table("gold.a")
