# Silver: corrective changes from reconciled snapshots (CONTRACT §5), appended to each source's
# change stream next to its binlog or shadow changes. `cdc-lakehouse snapshot reconcile` (a job
# step before the pipeline update: this pipeline cannot read the replicas it builds) writes them
# under <landing>/<source>/corrections/<schema>.<table>/<snapshot_id>.jsonl in the change-stream
# shape. They carry the snapshot's position as sequence, so AUTO CDC lets changes committed after
# that position win. See docs/snapshots.md.
from pyspark import pipelines as dp

from cdc_lakehouse.paths import glob_literal
from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.contract.corrections import CHANGE_STREAM_SCHEMA, FILE_FILTER, READ_OPTIONS, corrections_uri

settings = PipelineSettings.from_spark(spark)


def landed_corrections(source: str):
    # JSON with an explicit schema: no inference, and `row`/`before` stay the text written.
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .option("pathGlobFilter", FILE_FILTER)
        .options(**READ_OPTIONS)
        .schema(CHANGE_STREAM_SCHEMA)
        .load(glob_literal(corrections_uri(settings.landing_path, source)))  # a literal path, not a pattern
    )


def define_snapshot_corrections(source: str) -> None:
    @dp.append_flow(target=f"{settings.silver}.{source}_changes", name=f"{source}_snapshot_corrections")
    def snapshot_corrections():
        return landed_corrections(source)


def define_correction_images(source: str) -> None:
    """A shadow source's partial updates continue the rows the snapshots set: its change flow
    reads the corrections as they landed (silver/changes.py), from a table of their own (a flow
    cannot read the change stream it appends to)."""
    name = f"{settings.silver}.{source}_snapshot_corrections"
    dp.create_streaming_table(name, comment=f"Snapshot corrections of {source} as landed; the row images its "
                              "shadow change assembly continues.", table_properties={"quality": "silver"})

    @dp.append_flow(target=name, name=f"{source}_correction_images")
    def correction_images():
        return landed_corrections(source)


# Only sources with a change stream (silver/changes.py builds one per binlog or shadow source).
for source in sorted(set(settings.sources("binlog")) | set(settings.sources("shadow"))):
    define_snapshot_corrections(source)
for source in settings.sources("shadow"):
    define_correction_images(source)
