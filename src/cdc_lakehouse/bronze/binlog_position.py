"""One long that orders a binlog source's whole log: epoch, then file number, then offset.

A binlog position ``(file, pos)`` repeats after ``RESET MASTER``, a restore or a failover, so
the capture counts those restarts in an ``epoch`` (docs/binlog-epochs.md): every position of a
later epoch comes after every position of an earlier one. The LSN packs the three into the high,
middle and low bits of a long, so it is a plain, monotonic ``sequence.position``:

    epoch (11 bits: 0..2047) | file number (20 bits: 0..1048575) | pos (32 bits)

An event without ``epoch`` is of epoch 0, so landing lines written before epochs existed keep
their LSN. Bronze quarantines an epoch or a file number outside these ranges (a line that would
overflow the long and sort wrongly) with its reason.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

FILE_SHIFT = 32
EPOCH_SHIFT = 52
MAX_EPOCH = (1 << (63 - EPOCH_SHIFT)) - 1
MAX_FILE_NUMBER = (1 << (EPOCH_SHIFT - FILE_SHIFT)) - 1
FILE_NUMBER = "([0-9]+)$"  # the binlog file's numeric suffix: mysql-bin.000003 -> 3


def lsn(epoch: int, file_number: int, pos: int) -> int:
    return (epoch << EPOCH_SHIFT) + (file_number << FILE_SHIFT) + pos


def lsn_column(file_col: str = "file", pos_col: str = "pos", epoch_col: str | None = "epoch") -> Column:
    number = F.regexp_extract(F.col(file_col), FILE_NUMBER, 1).cast("long")
    epoch = F.coalesce(F.col(epoch_col), F.lit(0)).cast("long") if epoch_col else F.lit(0).cast("long")
    return epoch * F.lit(1 << EPOCH_SHIFT) + number * F.lit(1 << FILE_SHIFT) + F.col(pos_col)


def epoch_of(lsn_col: Column) -> Column:
    return F.shiftright(lsn_col, EPOCH_SHIFT)


# Bronze rules (SQL over the bronze columns): a position the LSN can hold.
IN_RANGE = (  # an absent field is the "required" rule's to report
    f"(`epoch` IS NULL OR `epoch` BETWEEN 0 AND {MAX_EPOCH}) "
    f"AND (`file` IS NULL OR coalesce(try_cast(regexp_extract(`file`, '{FILE_NUMBER}', 1) AS BIGINT) "
    f"<= {MAX_FILE_NUMBER}, false)) AND (`pos` IS NULL OR `pos` BETWEEN 0 AND {(1 << FILE_SHIFT) - 1})"
)
OUT_OF_RANGE_REASON = (
    f"'binlog position out of range: file needs a numeric suffix up to {MAX_FILE_NUMBER}, pos 0 to "
    f"{(1 << FILE_SHIFT) - 1}, epoch 0 to {MAX_EPOCH}'"
)
