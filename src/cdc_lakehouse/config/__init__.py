"""Configuration of cdc-lakehouse: the onboarding file (dlt-meta vocabulary + ``cdc_lakehouse:``).

``docs/onboarding.md`` is the field reference. The package's parts: ``models`` (the flows and
the loaded file), ``dlt_meta_keys`` (dlt-meta's keys we resolve per environment, drop or refuse),
``validation`` and ``flow_rules`` (what a file must satisfy), ``loading`` (reading the file).
"""

from cdc_lakehouse.config.dlt_meta_keys import DEFAULT_ENV
from cdc_lakehouse.config.loading import load_onboarding
from cdc_lakehouse.config.models import (
    CdcApplyChanges,
    CdcLakehouse,
    ColumnFilters,
    DataFlow,
    Onboarding,
    OnboardingError,
    SourceDetails,
)
from cdc_lakehouse.config.validation import parse_onboarding

__all__ = [
    "DEFAULT_ENV",
    "CdcApplyChanges",
    "CdcLakehouse",
    "ColumnFilters",
    "DataFlow",
    "Onboarding",
    "OnboardingError",
    "SourceDetails",
    "load_onboarding",
    "parse_onboarding",
]
