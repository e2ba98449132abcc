"""Validating onboarding data: each flow's ``*_<env>`` keys resolved for one environment, checked
key by key by the models and then by ``flow_rules``, every problem of the file reported at once
in the file's own words.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from cdc_lakehouse.config.dlt_meta_keys import (
    DEFAULT_ENV,
    ENV_KEYS,
    FLOW_ENV_KEYS,
    FUNCTION_NAMES,
    IGNORED_KEYS,
    NOT_IMPLEMENTED_KEYS,
    SOURCE_DETAILS_ENV_KEYS,
    render_key,
)
from cdc_lakehouse.config.flow_rules import cross_flow_problems, flow_problems, kind_problems, needs_silver
from cdc_lakehouse.config.models import CdcLakehouse, DataFlow, Onboarding, OnboardingError

_ENV_NAME = re.compile(r"^[A-Za-z0-9]+$")


def parse_onboarding(data: Any, env: str = DEFAULT_ENV, where: str = "<onboarding>") -> Onboarding:
    """Validate already-parsed onboarding data (a list of flow mappings)."""
    if not isinstance(env, str) or not _ENV_NAME.match(env):
        raise OnboardingError(f"{where}: env must be letters and digits, e.g. dev (got {env!r})")
    if not isinstance(data, list) or not data:
        raise OnboardingError(f"{where}: must be a non-empty list of flows (got {_kind(data)})")
    envs = _envs_of(data)
    if envs and env not in envs:  # a typo in the env would otherwise drop every per-env key
        raise OnboardingError(f"{where}: env {env!r} has no keys in this file (its envs: {', '.join(sorted(envs))})")
    parsed: list[tuple[str, DataFlow]] = []
    problems: list[str] = []
    ignored: dict[str, list[str]] = {}
    for index, raw in enumerate(data, start=1):
        flow_id = raw.get("data_flow_id") if isinstance(raw, Mapping) else None
        label = _label(index, flow_id)
        flow, found, flow_warnings = _parse_flow(raw, env)
        problems += [f"{where}: {label}: {problem}" for problem in found]
        for warning in flow_warnings:
            ignored.setdefault(warning, []).append(str(flow_id if flow_id not in (None, "") else f"#{index}"))
        if flow is not None:
            parsed.append((label, flow))
    problems += [f"{where}: {problem}" for problem in cross_flow_problems(parsed)]
    if problems:
        raise OnboardingError(problems)
    # One line per ignored key and reason, not per flow: a dlt-meta file repeats its keys.
    warnings = [f"{where}: {warning} (data_flow_id {', '.join(ids)})" for warning, ids in ignored.items()]
    return Onboarding(path=where, env=env, all_flows=[flow for _, flow in parsed], warnings=warnings)


def _envs_of(data: list[Any]) -> set[str]:
    """The env suffixes of the per-env keys of the flows in ``data``."""
    envs = set()
    for raw in data:
        if not isinstance(raw, Mapping):
            continue
        details = raw.get("source_details")
        keys = [*raw, *(details if isinstance(details, Mapping) else ())]
        for key in map(str, keys):
            base, _, suffix = key.rpartition("_")
            if base in ENV_KEYS and _ENV_NAME.match(suffix):
                envs.add(suffix)
    return envs


def _parse_flow(raw: Any, env: str) -> tuple[DataFlow | None, list[str], list[str]]:
    """The flow, its problems, and the warnings about keys it ignores."""
    if not isinstance(raw, Mapping):
        return None, [f"must be a mapping of onboarding keys (got {_kind(raw)})"], []
    resolved, problems = _resolve_env(raw, FLOW_ENV_KEYS, env, "")
    problems += _resolve_details(resolved, env, "")
    for layer in ("bronze", "silver"):
        flows = resolved.get(f"{layer}_append_flows")
        for index, append in enumerate(flows if isinstance(flows, list) else []):
            if isinstance(append, Mapping):
                flows[index] = dict(append)
                problems += _resolve_details(flows[index], env, f"{layer}_append_flows[{index}].")
    warnings = [
        f"{render_key((key,), env)}: ignored: {IGNORED_KEYS[key]}"
        for key in list(resolved) if key in IGNORED_KEYS and resolved.pop(key) is not None
    ]
    try:
        flow = DataFlow.model_validate(resolved)
    except ValidationError as exc:
        problems += [_describe(error, env) for error in exc.errors()]
        if resolved.get("silver_table") is None and needs_silver(resolved):  # reported with the others
            problems.append("silver_table: required key is missing")
        return None, problems, warnings
    if problems:
        return None, problems, warnings
    problems, kind_warnings = kind_problems(flow, env)
    if flow.silver_table is None and needs_silver(dict(iter(flow))):  # as a missing key: no further checks
        return None, problems, warnings + kind_warnings
    return flow, problems + flow_problems(flow), warnings + kind_warnings


def _resolve_details(flow: dict[Any, Any], env: str, prefix: str) -> list[str]:
    """Resolve the env keys of ``flow``'s source_details in place; the problems found."""
    details = flow.get("source_details")
    if not isinstance(details, Mapping):
        return []
    flow["source_details"], problems = _resolve_env(details, SOURCE_DETAILS_ENV_KEYS, env, f"{prefix}source_details.")
    return problems


def _resolve_env(raw: Mapping[Any, Any], bases: frozenset[str], env: str, prefix: str):
    """Keep ``<base>_<env>`` as ``<base>``; drop other environments' values."""
    resolved: dict[Any, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        base, _, suffix = str(key).rpartition("_")
        if key in bases:
            problems.append(f"{prefix}{key}: is set per environment in dlt-meta; write {key}_{env}")
        elif base in bases:
            if suffix == env:
                resolved[base] = value
        else:
            resolved[key] = value
    return resolved, problems


# --- error messages: pydantic's errors in the file's own words ---------------------------------


def _describe(error: Mapping[str, Any], env: str) -> str:
    loc = error["loc"]
    field = render_key(loc, env)
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{field}: {_unknown_key(loc, env)}"
    if kind == "missing":
        return f"{field}: required key is missing"
    if kind in ("too_short", "string_too_short"):
        return f"{field}: must not be empty"
    if kind == "value_error":
        return f"{field}: {str(error['msg']).removeprefix('Value error, ')}"
    return f"{field}: wrong type or value: {error['msg']} (got {_short(error.get('input'))})"


def _unknown_key(loc: tuple[Any, ...], env: str) -> str:
    key = str(loc[-1])
    if key in FUNCTION_NAMES or key in NOT_IMPLEMENTED_KEYS:
        return {**FUNCTION_NAMES, **NOT_IMPLEMENTED_KEYS}[key]
    model = _model_at(loc[:-1])
    if model is DataFlow and key in CdcLakehouse.model_fields:
        return "unknown key; cdc-lakehouse settings go under cdc_lakehouse:"
    known = [f"{name}_{env}" if name in ENV_KEYS else name for name in (model.model_fields if model else ())]
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
    return f"unknown key (did you mean {close[0]!r}?)" if close else "unknown key"


def _model_at(path: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = DataFlow
    for part in path:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        annotation = _unwrap_optional(field.annotation) if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _unwrap_optional(annotation: Any) -> Any:
    # `Model | None` names the model for "did you mean" in its keys.
    models = [arg for arg in get_args(annotation) if arg is not type(None)]
    return models[0] if len(models) == 1 else annotation


def _label(index: int, flow_id: Any) -> str:
    return f"flow #{index} (data_flow_id={flow_id})" if flow_id not in (None, "") else f"flow #{index}"


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
