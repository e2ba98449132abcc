"""The workspace client every ``remote`` command uses."""

from __future__ import annotations

from databricks.sdk import WorkspaceClient


def connect(profile: str | None = None, host: str | None = None) -> WorkspaceClient:
    """A client authenticated the way the Databricks CLI is: ``DATABRICKS_HOST`` and
    ``DATABRICKS_TOKEN`` (or OAuth M2M ``DATABRICKS_CLIENT_ID``/``_SECRET``) from the environment,
    else a profile of ``~/.databrickscfg`` (``--profile``, default ``DEFAULT``), including the
    OAuth login made with ``databricks auth login``."""
    from cdc_lakehouse import __version__

    return WorkspaceClient(profile=profile, host=host, product="cdc-lakehouse", product_version=__version__)
