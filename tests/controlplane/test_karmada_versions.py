"""Karmada v1.18 and v1.19 alike (``../shared/DESIGN.md`` §13).

v1.19 fills ``spec.clusters[*].components`` on bindings when MultiplePodTemplatesScheduling is on, and
removed the purge modes ``Immediately`` and ``Graciously`` (no longer read as ``Directly`` /
``Gracefully``; an object still carrying one fails validation on its next update). The control plane
must decide the same on bindings of either version, depend on no removed value, and say clearly when
it meets one in a binding written before the upgrade.
"""

from __future__ import annotations

import copy
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.controlplane import support as s
from webhook.common.admission import review
from webhook.controlplane.binding import REMOVED_PURGE_MODES, Binding, removed_purge_modes
from webhook.controlplane.capture import observe
from webhook.controlplane.handler import WorkHandler, internal_error
from webhook.controlplane.lookup import BindingCache
from webhook.controlplane.record import BindingRecord
from webhook.controlplane.watch import Watcher
from webhook.policy.restore import RestorePolicy

pytestmark = pytest.mark.shared

COMPONENTS = [
    {
        "name": "jobmanager",
        "replicas": 1,
        "replicaRequirements": {"resourceRequest": {"cpu": "1000m", "memory": "2Gi"}},
    },
    {
        "name": "taskmanager",
        "replicas": 3,
        "replicaRequirements": {"resourceRequest": {"cpu": "2000m", "memory": "4Gi"}},
    },
]


def as_v119(rb: dict[str, Any]) -> dict[str, Any]:
    """The binding as a v1.19 scheduler with MultiplePodTemplatesScheduling leaves it: the components on
    the spec, and each target cluster's share of them on ``spec.clusters[*].components``."""
    out = copy.deepcopy(rb)
    out["spec"]["components"] = copy.deepcopy(COMPONENTS)
    for target in out["spec"].get("clusters", []):
        target["components"] = [{"name": c["name"], "replicas": c["replicas"]} for c in COMPONENTS]
    return out


SCENARIOS = [
    ("scenA/rb-after-failover.json", "scenA/works-member2-final.json", "orders-flinkdeployment"),
    (
        "scenB-graceful/rb-after-failover.json",
        "scenB-graceful/works-member2-after-failover.json",
        "orders-grace-flinkdeployment",
    ),
    (
        "scenA3-taint/rb-after-failover.json",
        "scenA3-taint/works-member2-after-failover.json",
        "orders-taint-flinkdeployment",
    ),
]


@pytest.mark.parametrize(("rb_file", "works_file", "name"), SCENARIOS, ids=lambda v: v.split("/")[0])
def test_a_v119_binding_with_cluster_components_is_decided_as_on_v118(
    shared_data: Path, rb_file: str, works_file: str, name: str
) -> None:
    rb = s.binding(shared_data, rb_file)
    work = s.flink_work(shared_data, works_file, name)
    v119 = as_v119(rb)
    s.validate_binding(shared_data, v119)  # the shape the CRD declares
    assert all(c["components"] for c in v119["spec"]["clusters"])
    old, new = s.answer([rb], work), s.answer([v119], work)
    assert new.decision == old.decision == "injected"
    assert (new.labels, new.annotations) == (old.labels, old.annotations)
    assert Binding.from_object(v119).clusters == Binding.from_object(rb).clusters


def test_capture_records_the_same_from_v119_bindings(shared_data: Path) -> None:
    before = s.binding(shared_data, "scenA/rb-before-failure.json")
    after = s.binding(shared_data, "scenA/rb-after-failover.json")
    moments = [datetime(2026, 11, 29, 14, 0, tzinfo=UTC), datetime(2026, 11, 29, 14, 2, tzinfo=UTC)]

    def fold(*bindings: dict[str, Any]) -> BindingRecord:
        record = BindingRecord()
        for obj, moment in zip(bindings, moments, strict=True):
            record = observe(record, Binding.from_object(obj), moment)
        return record

    assert fold(as_v119(before), as_v119(after)) == fold(before, after)
    assert fold(as_v119(before), as_v119(after)).failover_count == 1


# --- purge modes v1.19 removed ---------------------------------------------------------------------


def _with_removed_mode(shared_data: Path, mode: str) -> dict[str, Any]:
    """scenA after the failover, its eviction task written under an old policy (stored before the
    upgrade: the v1.18.2 CRD's enum no longer lists it, so it is not validated here)."""
    rb = s.binding(shared_data, "scenA/rb-after-failover.json")
    rb["spec"]["gracefulEvictionTasks"][0]["purgeMode"] = mode
    return rb


@pytest.mark.parametrize("mode", sorted(REMOVED_PURGE_MODES))
def test_a_removed_purge_mode_is_named_with_its_replacement(shared_data: Path, mode: str) -> None:
    binding = Binding.from_object(_with_removed_mode(shared_data, mode))
    ((cluster, value, message),) = removed_purge_modes(binding)
    assert (cluster, value) == ("member1", mode)
    assert "removed in Karmada v1.19" in message and repr(REMOVED_PURGE_MODES[mode]) in message
    assert (
        removed_purge_modes(Binding.from_object(s.binding(shared_data, "scenA/rb-after-failover.json"))) == ()
    )


@pytest.mark.parametrize("mode", sorted(REMOVED_PURGE_MODES))
def test_the_work_webhook_decides_nothing_by_a_removed_purge_mode(shared_data: Path, mode: str) -> None:
    rb = _with_removed_mode(shared_data, mode)
    work = s.flink_work(shared_data, "scenA/works-member2-final.json", "orders-flinkdeployment")
    contract = RestorePolicy().contract
    handler = WorkHandler(s.static_lookup([rb], contract), contract, clock=lambda: s.FIXED_NOW)
    _, response = review(s.admission_review(work), handler, internal_error)
    expected = s.answer([s.binding(shared_data, "scenA/rb-after-failover.json")], work)
    assert response.decision == expected.decision == "injected"
    assert s.decode_patch(response.to_review("admission.k8s.io/v1")) == expected.patch


class _NoApi:
    """The watcher is fed events directly here; it never calls the API with capture off."""

    def list_bindings(self) -> Any:
        raise AssertionError("not called")

    def watch_bindings(self, resource_version: str) -> Any:
        raise AssertionError("not called")

    def patch_annotation(self, namespace: str, name: str, key: str, value: str) -> Any:
        raise AssertionError("not called")


def test_the_watch_says_once_when_it_meets_a_removed_purge_mode(
    shared_data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    watcher = Watcher(
        _NoApi(),
        BindingCache(),
        "flink-failover.io/last-known-state",
        clock=lambda: s.FIXED_NOW,
        capture_enabled=False,
    )
    rb = _with_removed_mode(shared_data, "Immediately")
    with caplog.at_level(logging.WARNING, logger="webhook.controlplane.watch"):
        for _ in range(3):  # the same binding seen again and again: one word
            watcher._apply("MODIFIED", rb)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "analytics/orders-flinkdeployment" in warnings[0]
    assert "'Immediately'" in warnings[0] and "'Directly'" in warnings[0] and "v1.19" in warnings[0]


REMOVED = re.compile(r"""purgeMode["']?\s*[:=]\s*["']?(Immediately|Graciously)\b""")


def test_nothing_shipped_depends_on_a_removed_purge_mode() -> None:
    """Policies, chart, samples, docs and code: no purge mode value v1.19 refuses."""
    offenders = []
    for folder in ("policies", "charts", "docs", "webhook", "tests/samples", "tests/fixtures"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and path.suffix in (".yaml", ".yml", ".json", ".md", ".py", ".tpl", ".txt"):
                for match in REMOVED.finditer(path.read_text(encoding="utf-8", errors="replace")):
                    offenders.append(f"{path.relative_to(REPO)}: {match.group(0)}")
    for path in sorted((REPO / "README.md",)):
        offenders += [f"README.md: {m.group(0)}" for m in REMOVED.finditer(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_the_supported_versions_are_stated_where_an_operator_looks() -> None:
    chart = yaml.safe_load((REPO / "charts" / "flink-failover" / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["annotations"]["flink-failover.io/karmada-versions"] == "v1.18, v1.19"
    for doc in ("README.md", "policies/karmada/README.md", "charts/flink-failover/README.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        flat = " ".join(text.replace("*", "").split())
        assert "Supported Karmada versions" in flat and "v1.18" in flat and "v1.19" in flat, doc
    table = (REPO / "policies/karmada/README.md").read_text(encoding="utf-8")
    for needed in ("MultiplePodTemplatesScheduling=true", "--enable-no-execute-taint-eviction=true",
                   "--allow-no-execute-taint-policy=true", "--enable-scheduler-estimator=true",
                   "SchedulingOvercommitProtection=true"):  # fmt: skip
        assert needed in table
