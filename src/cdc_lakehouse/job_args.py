"""What the job steps' commands (``snapshot reconcile|diff``, ``housekeeping``) share: where
their tables are, the onboarding file and the landing folder.

Locally the commands address a lake directory (``--lake DIR``); in the Databricks job they
address Unity Catalog tables (``--catalog C``), exactly one of the two. A tool: it opens a local
Spark session (``runtime``), which the layers below it never do.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_lakehouse.cli_types import lake_dir, missing_landing

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# As `run`'s, the working directory's: an installed wheel has no repo to take it from (a job task
# passes --config), and the demo runs from the repo's root.
DEFAULT_CONFIG = Path("conf") / "onboarding.yml"


def add_where(parser: argparse.ArgumentParser, lake_must_exist: bool = True) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--lake", type=lake_dir if lake_must_exist else str, help="local lake directory (delta-spark)")
    where.add_argument("--catalog", help="Unity Catalog catalog (Databricks job compute)")


def add_onboarding(parser: argparse.ArgumentParser, required: bool = True) -> None:
    default = str(DEFAULT_CONFIG) if DEFAULT_CONFIG.is_file() else None
    parser.add_argument("--config", default=default, required=required and default is None,
                        help="onboarding file (default: conf/onboarding.yml in the working directory, if there is one)")
    parser.add_argument("--env", default="dev", help="onboarding environment (default dev)")
    parser.add_argument("--silver-schema", default="silver")
    parser.add_argument("--bronze-schema", default="bronze")


def load_onboarding_of(args: argparse.Namespace) -> Any:
    """The onboarding that ``--config`` names, or None."""
    from cdc_lakehouse.config import load_onboarding

    return load_onboarding(args.config, env=args.env) if args.config else None


def check_landing(args: argparse.Namespace) -> None:
    """Checked by the command, not when parsing: the Databricks job's parameters name a Volume
    that exists only in the workspace, and they must parse anywhere (tests/test_bundle.py)."""
    if not Path(args.landing).is_dir():
        raise LookupError(missing_landing(args.landing))


def open_store(args: argparse.Namespace) -> tuple[SparkSession, Any]:
    """(spark, store) for ``--lake`` (a local session, delta-spark) or ``--catalog`` (the job's session)."""
    from pyspark.sql import SparkSession

    if getattr(args, "catalog", None):
        from cdc_lakehouse.storage.catalog import CatalogStore

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        return spark, CatalogStore(spark, args.catalog)
    from cdc_lakehouse.runtime.session import get_spark
    from cdc_lakehouse.storage import LakeStore

    spark = get_spark()
    return spark, LakeStore(spark, args.lake)
