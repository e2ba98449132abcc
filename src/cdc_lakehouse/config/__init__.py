"""Configuration of cdc-lakehouse: the onboarding file (dlt-meta vocabulary + ``cdc_lakehouse:``)."""

from cdc_lakehouse.config.onboarding import (
    DEFAULT_ENV,
    CdcApplyChanges,
    CdcLakehouse,
    ColumnFilters,
    DataFlow,
    Onboarding,
    OnboardingError,
    SourceDetails,
    load_onboarding,
    parse_onboarding,
)

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
