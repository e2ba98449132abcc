# Bronze: one streaming table per landing kind and source, raw and append-only (CONTRACT §2).
import dlt

from cdc_lakehouse.bronze import landing
from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)

KINDS = {
    # kind: (capture, folder under <landing>/<source>/, parsed schema)
    "binlog_events": ("binlog", "binlog", landing.BINLOG_EVENT),
    "sessions": ("binlog", "sessions", landing.SESSION),
    "shadow_transactions": ("shadow", "shadow/_transactions", landing.SHADOW_TXN),
}


def define_landing_table(source: str, kind: str, folder: str, schema) -> None:
    @dlt.table(
        name=f"{settings.bronze}.{source}_{kind}",
        comment=f"Raw {kind.replace('_', ' ')} of source {source}, one row per landing line.",
        table_properties={"quality": "bronze"},
    )
    @dlt.expect("parsed", "_raw IS NOT NULL")
    def landing_table():
        lines = (
            spark.readStream.format("cloudFiles").options(**landing.READER_OPTIONS)
            .load(f"{settings.landing_path}/{source}/{folder}")
            .select("value", "_metadata")
        )
        return landing.parse_lines(lines, schema, source)


def define_shadow_changes(flow) -> None:
    @dlt.table(
        name=f"{settings.bronze}.{flow.source}_shadow_{flow.schema_name}_{flow.table_name}",
        comment=f"Raw shadow change rows of {flow.qualified_table} from source {flow.source}.",
        table_properties={"quality": "bronze"},
    )
    def shadow_changes():
        lines = (
            spark.readStream.format("cloudFiles").options(**landing.READER_OPTIONS)
            .load(flow.landing_path(settings.landing_path))
            .select("value", "_metadata")
        )
        return landing.parse_lines(lines, landing.SHADOW_CHANGE, flow.source)


for capture in ("binlog", "shadow"):
    for source in settings.sources(capture):
        for kind, (kind_capture, folder, schema) in KINDS.items():
            if kind_capture == capture:
                define_landing_table(source, kind, folder, schema)

for flow in settings.onboarding.flows:
    if flow.capture == "shadow":
        define_shadow_changes(flow)
