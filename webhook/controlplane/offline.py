"""``flink-failover review --role control-plane --objects FILE``: bindings from a file stand in for Karmada.

FILE is a YAML stream (or a JSON ``List``) of ResourceBindings, typically ``kubectl get rb -o yaml``
output. The Work is answered by the same :class:`WorkHandler` the server uses.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.common import documents
from webhook.common.admission import AdmissionRequest, AdmissionResponse, Handler
from webhook.common.contract import Contract
from webhook.controlplane.binding import API_GROUP
from webhook.controlplane.handler import WorkHandler, internal_error
from webhook.controlplane.lookup import BindingLookupResult, Found, NotFound, found_from_object


def _flatten(docs: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for doc in docs:
        if not isinstance(doc, Mapping):
            continue
        if isinstance(doc.get("items"), list):  # a List (kubectl get -o yaml/json)
            yield from _flatten(doc["items"])
        else:
            yield doc


def load_bindings(path: str) -> list[Mapping[str, Any]]:
    """ResourceBindings from FILE; raises ValueError on anything that is not one (the CLI exits 2)."""
    docs = documents.load(path)  # DocumentError is a ValueError
    bindings = []
    for obj in _flatten(docs):
        group = str(obj.get("apiVersion", "")).partition("/")[0]
        if group != API_GROUP or obj.get("kind") != "ResourceBinding":
            raise ValueError(
                f"{path}: {obj.get('kind')!r} ({obj.get('apiVersion')!r}) is not a ResourceBinding"
            )
        bindings.append(obj)
    return bindings


@dataclass
class StaticLookup:
    objects: Mapping[tuple[str, str], Mapping[str, Any]]
    contract: Contract

    def lookup(self, namespace: str, name: str) -> BindingLookupResult:
        obj = self.objects.get((namespace, name))
        if obj is None:
            return NotFound("file")
        return found_from_object(obj, self.contract, "file")

    def cached(self, namespace: str, name: str) -> Found | None:
        return None  # the file is the binding as stored: read it as the server reads the API server


def static_lookup(bindings: Iterable[Mapping[str, Any]], contract: Contract) -> StaticLookup:
    objects = {}
    for obj in bindings:
        raw_meta = obj.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        objects[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = obj
    return StaticLookup(objects, contract)


def offline_handler(
    args: argparse.Namespace, contract: Contract
) -> tuple[Handler, Callable[[AdmissionRequest, Exception], AdmissionResponse]]:
    objects = getattr(args, "objects", None)
    if not objects:
        raise ValueError(
            "--role control-plane needs --objects FILE (ResourceBindings standing in for Karmada)"
        )
    return WorkHandler(static_lookup(load_bindings(objects), contract), contract), internal_error
