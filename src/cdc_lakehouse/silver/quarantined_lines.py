"""What a quarantined landing line still tells: the members that place it in its transaction.

Bronze quarantines a line whole (a NaN value, a bad type, a line cut short), but most such lines
still say which transaction they belong to. Silver reads those members leniently, as JSON (Spark
takes NaN) or, where JSON readers give up, by the pattern a writer gives them, so the transaction
can be held instead of applied without the line (silver/binlog_gaps.py, silver/shadow_gaps.py).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

# name -> (pattern whose group 1 is the value, Spark type)
Patterns = dict[str, tuple[str, str]]


def string_member(name: str) -> tuple[str, str]:
    return rf'"{name}"\s*:\s*"([^"\\]+)"', "string"


def number_member(name: str) -> tuple[str, str]:
    return rf'"{name}"\s*:\s*(\d+)', "long"


def members(patterns: Patterns) -> dict[str, Column]:
    """Each member of ``_raw`` as the lenient JSON reading gives it, else as its pattern finds it."""
    lenient = F.from_json("_raw", ", ".join(f"{name} {cast}" for name, (_, cast) in patterns.items()))
    return {
        name: F.coalesce(lenient[name], F.nullif(F.regexp_extract("_raw", pattern, 1), F.lit("")).cast(cast))
        for name, (pattern, cast) in patterns.items()
    }


def joined_notes(note: str = "note") -> Column:
    """The distinct notes of a group, sorted, as one text: what a held transaction names."""
    return F.concat_ws("; ", F.array_sort(F.collect_set(note)))


def note() -> Column:
    """What a held transaction names: the quarantined line and its reason."""
    return F.concat(F.lit("quarantined line "), F.col("_line").cast("string"), F.lit(" of "),
                    F.col("_source_file"), F.lit(": "), F.col("_reason"))
