"""Validate objects against the openAPIV3Schema of a real CRD, as kube-apiserver would (plus pruning).

kube-apiserver silently prunes fields a structural schema does not declare; for a webhook that would
mean a patch that 'works' yet loses its data. So unknown fields are made errors here.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if (
                node.get("type") == "object"
                and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def crd_validator(crd_file: Path, version: str) -> jsonschema.protocols.Validator:
    docs = [d for d in yaml.safe_load_all(crd_file.read_text()) if d]
    crd = docs[0]
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            schema = strict(v["schema"]["openAPIV3Schema"])
            # metadata is validated by the API server itself, not the CRD schema
            props = schema.setdefault("properties", {})
            props["metadata"] = {"type": "object"}
            props.setdefault("apiVersion", {"type": "string"})
            props.setdefault("kind", {"type": "string"})
            return jsonschema.Draft7Validator(schema)
    raise LookupError(f"{crd_file} has no version {version}")
