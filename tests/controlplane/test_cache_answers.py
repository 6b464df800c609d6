"""When the Work webhook may answer from its watch cache, and when it must read the binding fresh.

The cache answers what staleness cannot turn into an empty start (``handler.FROM_CACHE``): a relocation
that labels the workload, and on an UPDATE a job already running on the Work's cluster. A cache that does
not yet place the workload on the Work's cluster (the recorded Gracefully race) or that holds an older
stay there (a return it has not seen) is read past: the fresh binding decides.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import support as s
from webhook.common.admission import review
from webhook.controlplane.binding import Binding
from webhook.controlplane.capture import observe
from webhook.controlplane.handler import WorkHandler, internal_error
from webhook.controlplane.lookup import BindingLookupResult, Found
from webhook.controlplane.record import BindingRecord
from webhook.policy.restore import RestorePolicy

NAME = "orders-flinkdeployment"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@dataclass
class TwoViews:
    """The watch cache's binding and the API server's, and how often the fresh one was read."""

    cache: dict[str, Any] | None
    fresh: dict[str, Any]
    gets: list[str] = field(default_factory=list)

    def _found(self, obj: dict[str, Any], source: str) -> Found:
        binding = Binding.from_object(obj)
        return Found(binding, observe(BindingRecord(), binding, NOW), source)

    def cached(self, namespace: str, name: str) -> Found | None:
        return None if self.cache is None else self._found(self.cache, "cache")

    def lookup(self, namespace: str, name: str) -> BindingLookupResult:
        self.gets.append(f"{namespace}/{name}")
        return self._found(self.fresh, "api")


def _admit(views: TwoViews, work: dict[str, Any], operation: str = "CREATE") -> Any:
    policy = RestorePolicy()
    handler = WorkHandler(views, policy.contract, clock=lambda: NOW)
    body = s.admission_review(work)
    body["request"]["operation"] = operation
    if operation == "UPDATE":
        body["request"]["oldObject"] = copy.deepcopy(work)
    return review(body, handler, internal_error)[1]


@pytest.fixture
def scen_a(shared_data: Path) -> dict[str, Any]:
    return {
        "before": s.binding(shared_data, "scenA/rb-before-failure.json"),
        "after": s.binding(shared_data, "scenA/rb-after-failover.json"),
        "work2": s.flink_work(shared_data, "scenA/works-member2-final.json", NAME),
        "work1": s.flink_work(shared_data, "scenA/works-member1-before-failure.json", NAME),
    }


def test_a_cache_that_does_not_place_the_workload_there_yet_is_read_past(scen_a: dict[str, Any]) -> None:
    """The Gracefully race: the Work for member2 arrives before the cache saw the scheduler's move."""
    views = TwoViews(cache=scen_a["before"], fresh=scen_a["after"])
    answer = _admit(views, scen_a["work2"])
    assert views.gets == [f"analytics/{NAME}"]
    assert answer.decision == "injected"
    assert answer.audit.manifests[0].binding_from == "api"


def test_a_relocation_is_answered_from_the_cache(scen_a: dict[str, Any]) -> None:
    views = TwoViews(cache=scen_a["after"], fresh=scen_a["after"])
    answer = _admit(views, scen_a["work2"])
    assert views.gets == []
    assert answer.decision == "injected"
    assert answer.audit.manifests[0].binding_from == "cache"


def test_a_job_running_on_the_works_cluster_is_answered_from_the_cache_only_on_an_update(
    scen_a: dict[str, Any],
) -> None:
    """On a CREATE the cached stay may be an old one (A -> B -> A unseen): read fresh. An UPDATE's object
    exists on the member already, so its restore path no longer matters."""
    on_member1 = scen_a["before"]
    create = TwoViews(cache=on_member1, fresh=on_member1)
    _admit(create, scen_a["work1"], "CREATE")
    assert create.gets == [f"analytics/{NAME}"]
    update = TwoViews(cache=on_member1, fresh=on_member1)
    answer = _admit(update, scen_a["work1"], "UPDATE")
    assert update.gets == []
    assert answer.decision == "running-on-target"


def test_nothing_cached_is_read_fresh(scen_a: dict[str, Any]) -> None:
    views = TwoViews(cache=None, fresh=scen_a["after"])
    assert _admit(views, scen_a["work2"]).decision == "injected"
    assert views.gets == [f"analytics/{NAME}"]


def test_a_work_being_deleted_is_let_through_without_a_read(scen_a: dict[str, Any]) -> None:
    work = copy.deepcopy(scen_a["work1"])
    work["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    views = TwoViews(cache=None, fresh=scen_a["after"])
    answer = _admit(views, work, "UPDATE")
    assert views.gets == []
    assert answer.decision == "deleting" and not answer.patch
