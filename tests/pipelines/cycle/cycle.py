import dlt


@dlt.materialized_view(name="gold.a")
def a():
    return dlt.read("gold.b")


@dlt.materialized_view(name="gold.b")
def b():
    return dlt.read("gold.a")
