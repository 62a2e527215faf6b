"""Checks of Kubernetes manifests without a cluster.

- `model_problem`: the kubernetes client's models (the project's dependency): strict pydantic
  models generated from the API's OpenAPI document, which refuse unknown fields, wrong types
  and missing required fields.
- `openapi_problems`: the OpenAPI v3 document of the Kubernetes version the test lab builds,
  read from the lab's Go module cache when it is there (None otherwise): the same checks
  against that version, plus the uniqueness of list-map keys (container, volume, env and port
  names), which the models do not check.

Neither is the API server: name formats, cross-field rules and admission (Pod Security) are
checked by the lab's server-side dry run only.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from tests.k8s.lab.config import K8S_VERSION, Paths

MODELS = {
    ("v1", "Pod"): "V1Pod",
    ("v1", "Secret"): "V1Secret",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("v1", "Service"): "V1Service",
    ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy",
}
SPEC_FILES = ("api__v1_openapi.json", "apis__networking.k8s.io__v1_openapi.json")


def model_problem(obj: dict[str, Any]) -> str | None:
    """None when the client's model for the object's kind accepts it, else why not."""
    from kubernetes import client
    from pydantic import ValidationError

    name = MODELS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if name is None:
        return f"no model for {obj.get('apiVersion')} {obj.get('kind')}"
    try:
        getattr(client, name).model_validate(obj)
    except ValidationError as exc:
        return str(exc)
    return None


def spec_dir() -> Path:
    mod = Paths.default().gomodcache / f"k8s.io/kubernetes@v{K8S_VERSION}"
    return mod / "api" / "openapi-spec" / "v3"


@functools.cache
def openapi_schemas() -> dict[str, Any] | None:
    """Every schema of the core and networking groups, by name; None without the lab's cache."""
    directory = spec_dir()
    if not all((directory / f).is_file() for f in SPEC_FILES):
        return None
    schemas: dict[str, Any] = {}
    for file in SPEC_FILES:
        schemas.update(json.loads((directory / file).read_text())["components"]["schemas"])
    return schemas


def _schema_for(schemas: dict[str, Any], api_version: str, kind: str) -> dict[str, Any] | None:
    group, _, version = api_version.rpartition("/")
    for schema in schemas.values():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            if (gvk["group"], gvk["version"], gvk["kind"]) == (group, version, kind):
                return dict(schema)
    return None


def openapi_problems(obj: dict[str, Any]) -> list[str] | None:
    """What the lab's Kubernetes OpenAPI document refuses in `obj` ([] when nothing); None
    when the document is not on this machine."""
    schemas = openapi_schemas()
    if schemas is None:
        return None
    schema = _schema_for(schemas, obj.get("apiVersion", ""), obj.get("kind", ""))
    if schema is None:
        return [f"no schema for {obj.get('apiVersion')} {obj.get('kind')}"]
    problems: list[str] = []
    _check(obj, schema, schemas, "$", problems)
    return problems


def _resolve(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in schema:
            schema = schemas[schema["$ref"].rsplit("/", 1)[1]]
        elif "allOf" in schema and len(schema["allOf"]) == 1 and "type" not in schema:
            schema = schema["allOf"][0]
        else:
            return schema


def _check(
    value: Any, schema: dict[str, Any], schemas: dict[str, Any], path: str, out: list[str]
) -> None:
    schema = _resolve(schema, schemas)
    if "oneOf" in schema:  # IntOrString
        if isinstance(value, bool) or not isinstance(value, int | str):
            out.append(f"{path}: {value!r} is neither an integer nor a string")
        return
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            out.append(f"{path}: {value!r} is not an object")
            return
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                _check(item, properties[key], schemas, f"{path}.{key}", out)
            elif isinstance(extra, dict):
                _check(item, extra, schemas, f"{path}.{key}", out)
            elif properties is not None:
                out.append(f"{path}: unknown field {key!r}")
        for key in schema.get("required", []):
            if key not in value:
                out.append(f"{path}: missing required field {key!r}")
    elif kind == "array":
        if not isinstance(value, list):
            out.append(f"{path}: {value!r} is not a list")
            return
        for i, item in enumerate(value):
            _check(item, schema.get("items", {}), schemas, f"{path}[{i}]", out)
        keys = schema.get("x-kubernetes-list-map-keys")
        if keys and schema.get("x-kubernetes-list-type") == "map":
            seen = [tuple(item.get(k) for k in keys) for item in value if isinstance(item, dict)]
            if len(seen) != len(set(seen)):
                out.append(f"{path}: duplicate {'/'.join(keys)} in {seen}")
    elif kind == "string":
        if not isinstance(value, str):
            out.append(f"{path}: {value!r} is not a string")
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(f"{path}: {value!r} is not an integer")
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            out.append(f"{path}: {value!r} is not a number")
    elif kind == "boolean" and not isinstance(value, bool):
        out.append(f"{path}: {value!r} is not a boolean")
