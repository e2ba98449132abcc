"""Configuration of cdc-lakehouse: the onboarding file (dlt-meta vocabulary + ``cdc_lakehouse:``)."""

from cdc_lakehouse.config import onboarding as _onboarding
from cdc_lakehouse.config.onboarding import *  # noqa: F403 - the module's public names, listed once there

__all__ = _onboarding.__all__
