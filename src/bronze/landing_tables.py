# Bronze: every landing line of every onboarded source, kept raw and append-only (CONTRACT §2),
# or quarantined with its reason. See docs/bronze.md.
from pyspark import pipelines as dp

from cdc_lakehouse.bronze import landing
from cdc_lakehouse.bronze.kinds import landing_kinds, onboarded_tables
from cdc_lakehouse.bronze.rules import QUARANTINE_EXPECTATION, expectations
from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)


def table_properties(source: str) -> dict:
    """The onboarding's bronze_table_properties (e.g. pipelines.reset.allowed), for the source."""
    properties = {}
    for flow in settings.onboarding.for_source(source):
        properties.update(flow.bronze_table_properties)
    return {**properties, "quality": "bronze"}


def define_landing(source: str, kind) -> None:
    view = landing.view_name(source, kind)
    what = kind.name.replace("_", " ")

    @dp.temporary_view(name=view, comment=f"Landed {what} of source {source}: every line, parsed and checked.")
    def lines():
        return landing.landing_lines(
            spark, kind, settings.landing_path, source, onboarded_tables(settings.onboarding, source)
        )

    @dp.table(
        name=landing.table_name(settings.bronze, source, kind),
        comment=f"Raw {what} of source {source}, one row per accepted landing line.",
        table_properties=table_properties(source),
    )
    @dp.expect_all_or_drop(expectations(kind.rules))
    def accepted():
        return landing.bronze_rows(spark.readStream.table(view), kind)

    @dp.table(
        name=landing.quarantine_name(settings.bronze, source, kind),
        comment=f"Landing lines of {what} of source {source} that bronze rejects, raw, with the reason.",
        table_properties=table_properties(source),
    )
    @dp.expect_all_or_drop(QUARANTINE_EXPECTATION)
    def quarantined():
        return landing.quarantined_rows(spark.readStream.table(view))


for source, kind in landing_kinds(settings.onboarding):
    define_landing(source, kind)
