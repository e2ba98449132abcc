import dlt


@dlt.materialized_view(name="gold.a")
def a():
    return dlt.read("silver.does_not_exist")
