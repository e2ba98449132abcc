"""Row images (JSON text) as maps of column -> value text, with the onboarding's column filters
applied as silver applies them to replica columns (drop, mask, hash, then rename), so the audit
never shows a value the replicas hide."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.json_text import exact_image_values
from cdc_lakehouse.silver.filters import MASK


def _among(name: Column, columns) -> Column:
    # Spark column names are case-insensitive, so are the filter lists.
    return F.lower(name).isin([c.lower() for c in columns])


def image(json_text: Column, filters) -> Column:
    """The image as a map; nested values stay JSON text, numbers their source text."""
    return _filtered(exact_image_values(json_text), filters)


def key_image(key: Column, filters) -> Column:
    """A change's key as a map. Keys are canonical JSON (silver/keys.py), their values text
    already, so Spark's parser changes none of them."""
    return _filtered(F.from_json(key, "map<string,string>"), filters)


def _filtered(values: Column, filters) -> Column:
    if filters is None:
        return values
    if filters.drop:
        values = F.map_filter(values, lambda k, v: ~_among(k, filters.drop))
    if filters.mask:
        values = F.transform_values(
            values, lambda k, v: F.when(_among(k, filters.mask) & v.isNotNull(), F.lit(MASK)).otherwise(v))
    if filters.hash:
        values = F.transform_values(values, lambda k, v: F.when(_among(k, filters.hash), F.sha2(v, 256)).otherwise(v))
    return F.transform_keys(values, lambda k, v: renamed(k, filters))


def renamed(name: Column, filters) -> Column:
    if filters is None or not filters.rename:
        return name
    result = name
    for old, new in filters.rename.items():
        result = F.when(F.lower(name) == old.lower(), F.lit(new)).otherwise(result)
    return result


def column_names(columns: Column, filters) -> Column:
    """A list of source column names as silver names: dropped ones out, renamed ones renamed."""
    if filters is None:
        return columns
    if filters.drop:
        columns = F.filter(columns, lambda c: ~_among(c, filters.drop))
    return F.transform(columns, lambda c: renamed(c, filters))


def changed_values(changed: Column, before: Column, after: Column) -> Column:
    """column -> (before, after) for each changed column."""
    def entry(c):
        return F.struct(c.alias("key"), F.struct(before[c].alias("before"), after[c].alias("after")).alias("value"))

    entries = F.transform(changed, entry)
    return F.map_from_entries(entries)
