"""Components of a workload: from a FlinkDeployment, or Karmada's ``spec.components`` list.

A FlinkDeployment is read the way the Flink operator reads it, not the way Karmada's
interpreter does: ``2048m`` of memory is 2048 MiB, not 2.048 bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from webhook.common.flink import BLUE_GREEN, flatten_configuration
from webhook.placement import fields as f
from webhook.placement.errors import PlacementInputError
from webhook.placement.model import (
    Component,
    NodeSelectorTerm,
    Requirement,
    Toleration,
    frozen_map,
    frozen_units,
)
from webhook.placement.quantity import (
    CPU,
    EPHEMERAL,
    MEMORY,
    PODS,
    flink_cpu_millis,
    flink_memory_bytes,
    request_units,
    whole_kib,
)

MAIN_CONTAINER = "flink-main-container"
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
_FLINK_COMPONENT_FIELDS = ("replicas", "resource", "resources", "podTemplate")
_FLINK_RESOURCE_FIELDS = ("cpu", "memory", "ephemeralStorage")
_KARMADA_COMPONENT_FIELDS = ("name", "replicas", "replicaRequirements")
_KARMADA_REQUIREMENT_FIELDS = ("resourceRequest", "nodeClaim", "priorityClassName", "namespace")
_NODE_CLAIM_FIELDS = ("nodeSelector", "tolerations", "hardNodeAffinity")


def parse_tolerations(raw: Any, where: str) -> tuple[Toleration, ...]:
    result = []
    for i, item in enumerate(f.sequence(raw, where)):
        at = f"{where}[{i}]"
        tol = f.mapping(item, at, _TOLERATION_FIELDS)
        operator = f.string(tol.get("operator"), f"{at}.operator", "Equal")
        if operator not in ("Equal", "Exists"):
            raise PlacementInputError(f"{at}.operator: unknown operator {operator!r} (Equal or Exists)")
        key = f.string(tol.get("key"), f"{at}.key")
        if not key and operator != "Exists":
            raise PlacementInputError(f"{at}: an empty key needs operator Exists")
        effect = f.string(tol.get("effect"), f"{at}.effect")
        if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise PlacementInputError(f"{at}.effect: unknown effect {effect!r}")
        result.append(Toleration(key, operator, f.string(tol.get("value"), f"{at}.value"), effect))
    return tuple(result)


def _requirements(raw: Any, where: str, on_fields: bool) -> list[Requirement]:
    result = []
    for i, item in enumerate(f.sequence(raw, where)):
        at = f"{where}[{i}]"
        req = f.mapping(item, at, ("key", "operator", "values"))
        key = f.string(req.get("key"), f"{at}.key")
        operator = f.string(req.get("operator"), f"{at}.operator")
        if operator not in _OPERATORS:
            raise PlacementInputError(f"{at}.operator: unknown operator {operator!r}")
        values = tuple(
            f.string(v, f"{at}.values[{j}]") for j, v in enumerate(f.sequence(req.get("values"), at))
        )
        if operator in ("In", "NotIn") and not values:
            raise PlacementInputError(f"{at}.values: operator {operator} needs at least one value")
        if operator in ("Exists", "DoesNotExist") and values:
            raise PlacementInputError(f"{at}.values: operator {operator} takes no values")
        if operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
            raise PlacementInputError(f"{at}.values: operator {operator} needs exactly one integer")
        result.append(Requirement(key, operator, values, on_fields))
    return result


def parse_node_selector_terms(raw: Any, where: str) -> tuple[NodeSelectorTerm, ...] | None:
    """A v1 NodeSelector (``nodeSelectorTerms``: ORed terms of ANDed requirements); None when absent."""
    if raw is None:
        return None
    selector = f.mapping(raw, where, ("nodeSelectorTerms",))
    terms = []
    for i, item in enumerate(f.sequence(selector.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")):
        at = f"{where}.nodeSelectorTerms[{i}]"
        term = f.mapping(item, at, ("matchExpressions", "matchFields"))
        reqs = _requirements(term.get("matchExpressions"), f"{at}.matchExpressions", False)
        reqs += _requirements(term.get("matchFields"), f"{at}.matchFields", True)
        terms.append(NodeSelectorTerm(tuple(reqs)))
    return tuple(terms)


def parse_requests(raw: Any, where: str, flink_memory: bool = False) -> dict[str, int]:
    """A resource list of Kubernetes quantities in counting units (``flink_memory``: Flink syntax first)."""
    result: dict[str, int] = {}
    for name, value in f.mapping(raw, where).items():
        resource = str(name)
        at = f"{where}.{resource}"
        if resource == PODS:
            raise PlacementInputError(f"{at}: pods cannot be requested; every replica takes one pod slot")
        if flink_memory and resource == MEMORY:
            result[resource] = flink_memory_bytes(value, at)
        else:
            result[resource] = request_units(resource, value, at)
    return result


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """The operator's pod template merge: maps merge recursively, anything else is replaced."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _main_container_requests(pod_spec: Mapping[str, Any], where: str) -> dict[str, int]:
    """Extended resources (GPUs, ...) the template's main container asks for; cpu/memory come from Flink."""
    for i, container in enumerate(f.sequence(pod_spec.get("containers"), f"{where}.containers")):
        if isinstance(container, Mapping) and container.get("name") == MAIN_CONTAINER:
            at = f"{where}.containers[{i}].resources"
            resources = f.mapping(container.get("resources"), at)
            # Kubernetes defaults an unset request to the limit.
            spec = {
                **f.mapping(resources.get("limits"), f"{at}.limits"),
                **f.mapping(resources.get("requests"), f"{at}.requests"),
            }
            return {k: v for k, v in parse_requests(spec, at).items() if k not in (CPU, MEMORY, EPHEMERAL)}
    return {}


def _flink_component(
    name: str, spec: Mapping[str, Any], replicas: int, shared_template: Mapping[str, Any], where: str
) -> Component:
    own_template = f.mapping(spec.get("podTemplate"), f"{where}.podTemplate")
    template = _deep_merge(shared_template, own_template)
    pod_spec = f.mapping(template.get("spec"), f"{where}.podTemplate.spec")
    # Per resource, as the operator reads them since FLINK-33548: resources.requests, then
    # resources.limits (Kubernetes defaults a request to its limit), then the older resource field,
    # then (extended resources only) the template's main container.
    requests = _main_container_requests(pod_spec, f"{where}.podTemplate.spec")
    resource = f.mapping(spec.get("resource"), f"{where}.resource", _FLINK_RESOURCE_FIELDS)
    if resource.get("cpu") is not None:
        requests[CPU] = flink_cpu_millis(resource["cpu"], f"{where}.resource.cpu")
    if resource.get("memory") is not None:
        requests[MEMORY] = flink_memory_bytes(resource["memory"], f"{where}.resource.memory")
    if resource.get("ephemeralStorage") is not None:
        requests[EPHEMERAL] = request_units(
            EPHEMERAL, resource["ephemeralStorage"], f"{where}.resource.ephemeralStorage"
        )
    resources = f.mapping(spec.get("resources"), f"{where}.resources", ("requests", "limits", "claims"))
    for part in ("limits", "requests"):
        requests.update(parse_requests(resources.get(part), f"{where}.resources.{part}", flink_memory=True))
    requests = {name: whole_kib(name, units) for name, units in requests.items()}
    affinity = f.mapping(pod_spec.get("affinity"), f"{where}.podTemplate.spec.affinity")
    node_affinity = f.mapping(affinity.get("nodeAffinity"), f"{where}.podTemplate.spec.affinity.nodeAffinity")
    return Component(
        name=name,
        replicas=replicas,
        requests=frozen_units(requests),
        node_selector=frozen_map(
            f.string_map(pod_spec.get("nodeSelector"), f"{where}.podTemplate.spec.nodeSelector")
        ),
        tolerations=parse_tolerations(pod_spec.get("tolerations"), f"{where}.podTemplate.spec.tolerations"),
        affinity_terms=parse_node_selector_terms(
            node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
            f"{where}.podTemplate.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        ),
        priority_class=f.string(
            pod_spec.get("priorityClassName"), f"{where}.podTemplate.spec.priorityClassName"
        ),
    )


def taskmanager_replicas(spec: Mapping[str, Any]) -> int:
    """``taskManager.replicas``, else ceil(parallelism / slots), else 1.

    Slots default to Flink's own default of 1 when only the parallelism is given; a non-positive slot
    count is a broken configuration and falls back to 1 replica rather than dividing by it.
    """
    tm = f.mapping(spec.get("taskManager"), "spec.taskManager")
    if tm.get("replicas") is not None:
        return f.integer(tm["replicas"], "spec.taskManager.replicas")
    job = f.mapping(spec.get("job"), "spec.job")
    if job.get("parallelism") is None:
        return 1
    parallelism = f.integer(job["parallelism"], "spec.job.parallelism")
    conf = flatten_configuration(spec.get("flinkConfiguration"))
    slots_text = conf.get("taskmanager.numberOfTaskSlots", "1")
    try:
        slots = int(slots_text)
    except ValueError:
        raise PlacementInputError(
            f"spec.flinkConfiguration.taskmanager.numberOfTaskSlots: not an integer: {slots_text!r}"
        ) from None
    if slots <= 0 or parallelism <= 0:
        return 1
    return max(1, math.ceil(parallelism / slots))


def components_from_flink(obj: Mapping[str, Any]) -> tuple[Component, ...]:
    """The job manager and task manager components of a FlinkDeployment."""
    return components_from_flink_spec(f.mapping(obj.get("spec"), "spec"), "spec")


def components_from_flink_spec(spec: Mapping[str, Any], where: str) -> tuple[Component, ...]:
    """The components of a FlinkDeployment's spec found at ``where`` (``spec``, or a
    FlinkBlueGreenDeployment's ``spec.template.spec``)."""
    shared = f.mapping(spec.get("podTemplate"), f"{where}.podTemplate")
    jm = f.mapping(spec.get("jobManager"), f"{where}.jobManager", _FLINK_COMPONENT_FIELDS)
    tm = f.mapping(spec.get("taskManager"), f"{where}.taskManager", _FLINK_COMPONENT_FIELDS)
    jm_replicas = (
        f.integer(jm["replicas"], f"{where}.jobManager.replicas") if jm.get("replicas") is not None else 1
    )
    return (
        _flink_component("jobmanager", jm, jm_replicas, shared, f"{where}.jobManager"),
        _flink_component("taskmanager", tm, taskmanager_replicas(spec), shared, f"{where}.taskManager"),
    )


def components_from_karmada(raw: Any, where: str, flink_memory: bool = False) -> tuple[Component, ...]:
    """Karmada's component list (``spec.components`` of a ResourceBinding, or the interpreter's output).

    ``flink_memory``: the list was interpreted from a FlinkDeployment, whose memory strings Karmada
    copies verbatim, so they are read with Flink's syntax first.
    """
    result = []
    seen: set[str] = set()
    for i, item in enumerate(f.sequence(raw, where)):
        at = f"{where}[{i}]"
        comp = f.mapping(item, at, _KARMADA_COMPONENT_FIELDS)
        name = f.string(comp.get("name"), f"{at}.name")
        if not name:
            raise PlacementInputError(f"{at}.name: a component needs a name")
        if name in seen:
            raise PlacementInputError(f"{at}.name: duplicate component {name!r}")
        seen.add(name)
        req = f.mapping(
            comp.get("replicaRequirements"), f"{at}.replicaRequirements", _KARMADA_REQUIREMENT_FIELDS
        )
        claim = f.mapping(req.get("nodeClaim"), f"{at}.replicaRequirements.nodeClaim", _NODE_CLAIM_FIELDS)
        cw = f"{at}.replicaRequirements.nodeClaim"
        result.append(
            Component(
                name=name,
                replicas=f.integer(comp.get("replicas", 1), f"{at}.replicas"),
                requests=frozen_units(
                    parse_requests(
                        req.get("resourceRequest"), f"{at}.replicaRequirements.resourceRequest", flink_memory
                    )
                ),
                node_selector=frozen_map(f.string_map(claim.get("nodeSelector"), f"{cw}.nodeSelector")),
                tolerations=parse_tolerations(claim.get("tolerations"), f"{cw}.tolerations"),
                affinity_terms=parse_node_selector_terms(
                    claim.get("hardNodeAffinity"), f"{cw}.hardNodeAffinity"
                ),
                priority_class=f.string(
                    req.get("priorityClassName"), f"{at}.replicaRequirements.priorityClassName"
                ),
            )
        )
    if not result:
        raise PlacementInputError(f"{where}: no components")
    return tuple(result)


def load_workload(obj: Any, where: str = "workload") -> tuple[Component, ...]:
    """Components from any accepted workload shape.

    FlinkDeployment; ResourceBinding (``spec.components``); a mapping with ``components``; or a bare list.
    """
    if isinstance(obj, list):
        comps = components_from_karmada(obj, where)
    else:
        doc = f.mapping(obj, where)
        kind = doc.get("kind")
        if kind in ("FlinkDeployment", BLUE_GREEN):
            root = "spec"
            spec = f.mapping(doc.get("spec"), "spec")
            if kind == BLUE_GREEN:  # one set: the steady state (a switch runs a second set for a while)
                root = "spec.template.spec"
                template = f.mapping(spec.get("template"), "spec.template")
                spec = f.mapping(template.get("spec"), root)
            comps = components_from_flink_spec(spec, root)
            for comp, part in zip(comps, ("jobManager", "taskManager"), strict=True):
                if MEMORY not in comp.requests:
                    at = f"{root}.{part}"
                    raise PlacementInputError(
                        f"{where}: {at} requests no memory (set {at}.resources.requests.memory "
                        f"or {at}.resource.memory): "
                        f"the Flink operator rejects such a {kind}, so no cluster can run it"
                    )
        elif kind == "FlinkSessionJob":
            session = f.mapping(doc.get("spec"), "spec").get("deploymentName") or "its session cluster"
            raise PlacementInputError(
                f"{where}: a FlinkSessionJob has no pods of its own: it runs in the task managers of the "
                f"FlinkDeployment it names (spec.deploymentName: {session}) and goes where that one is; "
                "place that FlinkDeployment instead"
            )
        elif kind == "ResourceBinding" or kind == "ClusterResourceBinding":
            spec = f.mapping(doc.get("spec"), f"{where}.spec")
            target = f.mapping(spec.get("resource"), f"{where}.spec.resource")
            comps = components_from_karmada(
                spec.get("components"), f"{where}.spec.components", target.get("kind") == "FlinkDeployment"
            )
        elif "components" in doc and kind is None:
            f.mapping(doc, where, ("components",))
            comps = components_from_karmada(doc["components"], f"{where}.components")
        else:
            raise PlacementInputError(
                f"{where}: not a workload (expected a FlinkDeployment, a FlinkBlueGreenDeployment, a "
                f"ResourceBinding with spec.components, or a components list), got kind {kind!r}"
            )
    if sum(c.replicas for c in comps) == 0:
        raise PlacementInputError(f"{where}: every component has 0 replicas; nothing to place")
    return comps
