"""A Karmada Work (work.karmada.io/v1alpha1): which cluster it is for, which binding it came from,
which manifests are Flink workloads, and the JSON Patch that labels them. Pure.

Facts (recorded from Karmada v1.18.2): Works for a cluster live in ``karmada-es-<cluster>``; they
carry the annotations ``resourcebinding.karmada.io/name`` and ``/namespace``; the workload is in
``spec.workload.manifests[]``; ResourceBinding names are ``<name>-<kind lowercased>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.common.flink import GROUP, KINDS
from webhook.common.patch import Op, escape, set_fields
from webhook.common.untyped import as_map, as_str
from webhook.controlplane.audit import WorkDecision

WORK_GROUP = "work.karmada.io"
EXECUTION_NAMESPACE_PREFIX = "karmada-es-"
BINDING_NAME_ANNOTATION = "resourcebinding.karmada.io/name"
BINDING_NAMESPACE_ANNOTATION = "resourcebinding.karmada.io/namespace"


def cluster_of(namespace: str) -> str:
    """``karmada-es-<cluster>`` -> ``<cluster>``; "" for any other namespace."""
    if namespace.startswith(EXECUTION_NAMESPACE_PREFIX):
        return namespace[len(EXECUTION_NAMESPACE_PREFIX) :]
    return ""


@dataclass(frozen=True)
class BindingRef:
    namespace: str
    name: str


@dataclass(frozen=True)
class FlinkManifest:
    """One Flink workload in a Work: where it stands, which binding it came from, and the two versions
    of it a patch is computed against (as sent, and as it was in the Work before an UPDATE)."""

    index: int
    kind: str
    namespace: str
    name: str
    binding: BindingRef
    sent: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    old_metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class WorkTarget:
    cluster: str
    work_namespace: str
    work_name: str
    manifests: tuple[FlinkManifest, ...]


@dataclass(frozen=True)
class NotForUs:
    """The Work is none of our business; ``reason`` says why (for logs and metrics)."""

    reason: WorkDecision


def is_flink_manifest(manifest: Mapping[str, Any]) -> bool:
    api_version = as_str(manifest.get("apiVersion"))
    return api_version.partition("/")[0] == GROUP and "/" in api_version and manifest.get("kind") in KINDS


def manifest_list(work: Mapping[str, Any]) -> list[Any] | None:
    """``spec.workload.manifests`` as sent (entries unchecked), None when it is not a list."""
    manifests = as_map(as_map(work.get("spec")).get("workload")).get("manifests")
    return manifests if isinstance(manifests, list) else None


def parse_work(
    work: Mapping[str, Any], request_namespace: str = "", old_work: Mapping[str, Any] | None = None
) -> WorkTarget | NotForUs:
    """The Work's cluster and Flink manifests; ``old_work`` (an UPDATE's) gives each its old metadata."""
    meta = as_map(work.get("metadata"))
    namespace = request_namespace or as_str(meta.get("namespace"))
    cluster = cluster_of(namespace)
    if not cluster:
        return NotForUs(WorkDecision.NOT_EXECUTION_NAMESPACE)
    manifests = manifest_list(work)
    if manifests is None:
        return NotForUs(WorkDecision.NO_MANIFESTS)
    annotations = as_map(meta.get("annotations"))
    rb_name = as_str(annotations.get(BINDING_NAME_ANNOTATION))
    rb_namespace = as_str(annotations.get(BINDING_NAMESPACE_ANNOTATION))
    found: list[FlinkManifest] = []
    for index, manifest in enumerate(manifests):
        if not isinstance(manifest, Mapping) or not is_flink_manifest(manifest):
            continue
        m_meta = as_map(manifest.get("metadata"))
        kind = as_str(manifest.get("kind"))
        name = as_str(m_meta.get("name"))
        m_namespace = as_str(m_meta.get("namespace"))
        if rb_name:
            ref = BindingRef(rb_namespace or m_namespace, rb_name)
        else:
            ref = BindingRef(m_namespace, f"{name}-{kind.lower()}")
        if not ref.name or not ref.namespace:
            continue
        old = _old_metadata(old_work, kind, m_namespace, name)
        found.append(FlinkManifest(index, kind, m_namespace, name, ref, manifest, old))
    if not found:
        return NotForUs(WorkDecision.NO_FLINK_MANIFEST)
    return WorkTarget(cluster, namespace, as_str(meta.get("name")), tuple(found))


def _old_metadata(
    old_work: Mapping[str, Any] | None, kind: str, namespace: str, name: str
) -> Mapping[str, Any]:
    """The same manifest's metadata in the Work before this UPDATE ({} on CREATE or when it is gone)."""
    for candidate in manifest_list(old_work or {}) or ():
        if isinstance(candidate, Mapping) and candidate.get("kind") == kind:
            meta = as_map(candidate.get("metadata"))
            if as_str(meta.get("name")) == name and as_str(meta.get("namespace")) == namespace:
                return meta
    return {}


def manifest_ops(
    manifest: FlinkManifest, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> list[Op]:
    """Ops that set labels/annotations on ``spec.workload.manifests[index].metadata`` of this exact Work."""
    sent = manifest.sent
    prefix = f"/{escape('spec')}/{escape('workload')}/{escape('manifests')}/{manifest.index}"
    ops = set_fields(sent, ("metadata", "labels"), labels)
    # set_fields may have created metadata for the labels; annotations then go inside that new map.
    if ops and ops[0]["path"] == "/metadata":
        ops[0]["value"].setdefault("annotations", {}).update(annotations)
    else:
        ops += set_fields(sent, ("metadata", "annotations"), annotations)
    return [{**op, "path": prefix + op["path"]} for op in ops]
