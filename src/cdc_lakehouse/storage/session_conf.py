"""Session settings for the span of one piece of work, then as they were."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def settings(spark: SparkSession, values: Mapping[str, object]) -> Iterator[None]:
    """``values`` set on the session while the block runs; each key's earlier value (or none)
    is restored after it, also when it fails."""
    conf = spark.conf
    previous: dict[str, str | None] = {key: conf.get(key, None) for key in values}
    for key, value in values.items():
        conf.set(key, str(value))
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                conf.unset(key)
            else:
                conf.set(key, old)
