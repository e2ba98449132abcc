"""Landing files -> bronze rows and quarantined lines, every line accounted for.

Each landing kind has one view of its lines (parsed, with provenance and ``_reason``) and two
streaming tables reading it: ``bronze.<source>_<kind>`` (the lines every rule accepts) and
``bronze.<source>_<kind>_quarantine`` (the others, raw, with why). Nothing is deduplicated:
duplicate deliveries are kept, and silver recognises them by their content position.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.fields import parse_fields
from cdc_lakehouse.bronze.kinds import Kind
from cdc_lakehouse.bronze.lines import FILE_COLUMNS, numbered_lines, read_landing, whole_files
from cdc_lakehouse.bronze.rules import reason
from cdc_lakehouse.paths import glob_literal

# Where a line came from; the file's size and time as read tell gold.landing_summary whether
# the file changed after bronze read it (bronze/summary.py).
PROVENANCE = ("_source", "_source_file", "_line", "_ingested_at", *FILE_COLUMNS)
QUARANTINE_COLUMNS = ("_raw", "_reason", *PROVENANCE)


def table_name(schema: str, source: str, kind: Kind) -> str:
    return f"{schema}.{source}_{kind.name}"


def quarantine_name(schema: str, source: str, kind: Kind) -> str:
    return f"{table_name(schema, source, kind)}_quarantine"


def view_name(source: str, kind: Kind) -> str:
    return f"{source}_{kind.name}_landing"


def bronze_columns(kind: Kind) -> list[str]:
    extra = ["_rescued_data"] * kind.rescue + ["_onboarded"] * kind.flags_onboarding
    return [*kind.bronze_columns, *extra, *PROVENANCE]


def landing_lines(spark, kind: Kind, landing_path: str, source: str, onboarded: list[str]) -> DataFrame:
    """Every new line of the kind's landing files, parsed, with ``_raw`` and ``_reason``."""
    # The landing path and source name are literal, the kind's folder may be a pattern.
    files = read_landing(spark, f"{glob_literal(landing_path)}/{glob_literal(source)}/{kind.folder}", kind.name_filter)
    return checked_lines(files, kind, source, onboarded)


def checked_lines(files: DataFrame, kind: Kind, source: str, onboarded: list[str]) -> DataFrame:
    """``files`` as ``read_landing`` gives them: each file whole (``value``) and its path."""
    lines = whole_files(files) if kind.whole_file else numbered_lines(files)
    parsed = parse_fields(lines, kind.fields, kind.extra_bad)
    columns = parsed.withColumns({name: make() for name, make in kind.derived.items()})
    columns = columns.withColumns({"_source": F.lit(source), "_ingested_at": F.current_timestamp()})
    if kind.flags_onboarding:
        columns = columns.withColumn("_onboarded", is_onboarded(kind, onboarded))
    checked = columns.withColumn("_reason", reason(kind.rules))
    return checked.select(*bronze_columns(kind), "_raw", "_reason")


def bronze_rows(lines: DataFrame, kind: Kind) -> DataFrame:
    """The bronze table's query; its expectations drop the lines that go to quarantine."""
    return lines.select(*bronze_columns(kind))


def quarantined_rows(lines: DataFrame) -> DataFrame:
    return lines.select(*QUARANTINE_COLUMNS)


def is_onboarded(kind: Kind, onboarded: list[str]):
    """Whether the row's source table is replicated; a row about no table is not held back."""
    if kind.source_table is None:
        return F.lit(True)
    table = F.lower(F.expr(kind.source_table))
    return F.when(table.isNull(), True).otherwise(table.isin(onboarded) if onboarded else F.lit(False))
