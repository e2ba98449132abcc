"""Reading an onboarding file: strict YAML (a duplicate key is an error, not a silent overwrite),
validated by ``validation``, with the files its flows name found next to it.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from cdc_lakehouse.config.dlt_meta_keys import DEFAULT_ENV, IGNORED_KEYS, ignored_key
from cdc_lakehouse.config.models import AppendFlow, DataFlow, Onboarding, OnboardingError, Sink, is_uri
from cdc_lakehouse.config.validation import parse_onboarding


def load_onboarding(path: str | PathLike[str], env: str = DEFAULT_ENV) -> Onboarding:
    """Read and validate an onboarding file, resolving ``*_<env>`` keys for ``env``."""
    where = str(path)
    data, duplicates = _read_yaml(Path(path), where)
    onboarding = parse_onboarding(data, env=env, where=where)
    flows = [_schema_path_from(flow, Path(path).parent) for flow in onboarding.all_flows]
    return onboarding.model_copy(update={"all_flows": flows, "warnings": duplicates + onboarding.warnings})


def _schema_path_from(flow: DataFlow, folder: Path) -> DataFlow:
    """The flow with its relative file paths taken relative to ``folder`` (the onboarding
    file's), so the files are found whatever the working directory: ``source_schema_path``, and
    a dlt-meta flow's ``source_path``, expectation and transformation files and sink paths."""
    details_keys = ["source_schema_path"] + ([] if flow.is_change_stream else ["source_path"])
    flow_keys = [] if flow.is_change_stream else [
        "bronze_data_quality_expectations_json", "silver_data_quality_expectations_json", "silver_transformation_json"]
    appends = {f"{layer}_append_flows": [_details_from(a, ["source_schema_path", "source_path"], folder)
                                         for a in flow.append_flows(layer)] for layer in ("bronze", "silver")}
    sinks = {f"{layer}_sinks": [_sink_path_from(sink, folder) for sink in flow.sinks(layer)]
             for layer in ("bronze", "silver")}
    return _details_from(flow, details_keys, folder).model_copy(
        update={**appends, **sinks, **_relative_to(flow, flow_keys, folder)})


def _sink_path_from(sink: Sink, folder: Path) -> Sink:
    """A Delta sink with its ``path`` option relative to ``folder``."""
    options = {key: _relative(value, folder) if key.lower() == "path" else value for key, value in sink.options.items()}
    return sink.model_copy(update={"options": options})


_Sourced = TypeVar("_Sourced", "DataFlow", "AppendFlow")


def _details_from(model: _Sourced, keys: list[str], folder: Path) -> _Sourced:
    """``model`` (a flow or an append flow) with the ``keys`` of its source_details relative to ``folder``."""
    details = model.source_details
    return model.model_copy(update={"source_details": details.model_copy(update=_relative_to(details, keys, folder))})


def _relative_to(model: BaseModel, keys: list[str], folder: Path) -> dict[str, str]:
    values = {key: getattr(model, key) for key in keys}
    return {key: _relative(value, folder) for key, value in values.items() if value}


def _relative(path: str, folder: Path) -> str:
    """``path`` taken relative to ``folder``, unless it is absolute or a URI."""
    return path if Path(path).is_absolute() or is_uri(path) else str(folder / path)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, which PyYAML would silently overwrite; except
    keys that are ignored anyway (dlt-meta's own files repeat some), which are warnings."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.duplicates: list[str] = []


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    first_line: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *anchor` may be overridden by explicit keys on purpose
        key = loader.construct_object(key_node, deep=True)
        if key in first_line and ignored_key(key):
            line = key_node.start_mark.line + 1
            loader.duplicates.append(f"line {line}: duplicate key {key!r} (first at line {first_line[key]}): "
                                     f"ignored: {IGNORED_KEYS[ignored_key(key)]}")
        elif key in first_line:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {first_line[key]})",
                key_node.start_mark,
            )
        first_line[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path, where: str) -> tuple[Any, list[str]]:
    """The file's data, and warnings about duplicate keys that do not matter."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise OnboardingError(f"{where}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data(), [f"{where}: {line}" for line in loader.duplicates]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise OnboardingError(f"{where}: {at}invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise OnboardingError(f"{where}: invalid YAML: {exc}") from None
    finally:
        loader.dispose()
