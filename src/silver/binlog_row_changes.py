# Silver (first stage): binlog row events flattened to one row per changed row, in log order.
import dlt

from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.silver.binlog_rows import explode_row_events

settings = PipelineSettings.from_spark(spark)


def define_row_changes(source: str) -> None:
    @dlt.table(
        name=f"{settings.silver}.{source}_binlog_row_changes",
        comment=f"One row per changed row image in the binlog of source {source}.",
        table_properties={"quality": "silver"},
    )
    def row_changes():
        return explode_row_events(dlt.read_stream(f"{settings.bronze}.{source}_binlog_events"))


for source in settings.sources("binlog"):
    define_row_changes(source)
