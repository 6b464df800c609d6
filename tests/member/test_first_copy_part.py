"""A first copy's keeper where the served tests (test_first_copy.py) do not reach: the admission's path
touches neither storage nor the fence (every write of every job in scope takes it), the Events where an
UPDATE adds or drops the keeper, and what is no first copy as the chart's entry and the webhook read it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.objects import apply, decode_patch, flink_deployment, review
from webhook.common.admission import parse_review
from webhook.common.flink import FlinkResource, runs_keeper
from webhook.member.firstcopy import first_copy_part, unlabelled
from webhook.member.handler import MemberHandler
from webhook.member.keeper import Admission, KeeperSetup, Kept, Sidecars
from webhook.policy.restore import policy_from_dict
from webhook.restore.outcome import RestoreDecision, RestoreOutcome

P = "flink-failover.io"
SETUP = KeeperSetup("registry.example/flink-failover:1.0", "member1", (1, 30))
SKIP = RestoreDecision(RestoreOutcome.SKIP, "no failover label")


class Untouchable:
    """Stands where the handler's storage and fencing gate are: any use of them fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the first copy's admission used {name}: it must make no storage call")


def test_a_first_copys_admission_touches_neither_storage_nor_the_fence() -> None:
    policy = policy_from_dict({})
    untouchable: Any = Untouchable()
    handler = MemberHandler(policy, untouchable, fencing=untouchable, keeper=lambda: SETUP)
    try:
        obj = flink_deployment(checkpoint_dir="s3://bkt/ckpt")
        response = handler(parse_review(review(obj))).to_review()["response"]
        assert response["allowed"] is True
        created = apply(obj, decode_patch(response))
        assert runs_keeper(created) and created["metadata"] == obj["metadata"]
        again = handler(parse_review(review(obj, operation="UPDATE", old=created))).to_review()["response"]
        assert runs_keeper(apply(obj, decode_patch(again)))  # Karmada's re-apply: put back
    finally:
        handler.close()


def admission(
    obj: dict[str, Any], old: dict[str, Any] | None = None, setup: KeeperSetup = SETUP, **policy: Any
) -> Admission:
    """A SKIP admission of ``obj`` (an UPDATE from ``old``) as the chart's first-copy entry sends it."""
    return Admission(
        operation="UPDATE" if old is not None else "CREATE",
        obj=obj,
        resource=FlinkResource.from_object(obj),
        old_obj=old,
        old=FlinkResource.from_object(old) if old is not None else None,
        decision=SKIP,
        policy=policy_from_dict(policy),
        setup=setup,
    )


def _part(obj: dict[str, Any], old: dict[str, Any] | None, setup: KeeperSetup = SETUP, **policy: Any) -> Any:
    return first_copy_part(admission(obj, old, setup, **policy))


def test_events_where_the_keeper_is_added_or_dropped_not_at_every_write() -> None:
    obj = flink_deployment(checkpoint_dir="s3://bkt/ckpt")
    created = _part(obj, None)
    assert created.kept is Kept.INJECTED and [e.reason for e in created.events] == ["KeeperInjected"]
    running = apply(obj, list(created.ops))
    assert _part(obj, running).events == ()  # Karmada's re-apply: put back, a warning only
    off = {"fencing": {"keeper": {"offJobs": ["analytics/orders"]}}}
    assert [e.reason for e in _part(obj, running, **off).events] == ["KeeperOff"]  # dropped: said
    assert _part(obj, copy.deepcopy(obj), **off).events == ()  # never had it: nothing new to say
    declared_off = KeeperSetup(SETUP.image, SETUP.cluster, (1, 30), "", Sidecars.OFF)
    dropped = _part(obj, running, declared_off)
    assert dropped.kept is Kept.UNSUPPORTED and [e.reason for e in dropped.events] == ["KeeperNotInjected"]


@pytest.mark.parametrize(
    ("labels", "first"),
    [
        ({"app": "orders"}, True),
        ({f"{P}/failover": "false"}, True),
        ({f"{P}/failover": "True"}, False),  # the webhook restores it: never this storage-free path
        ({f"{P}/job-id": "fc7fce4860f65c315b1dfa67267da151"}, False),
        ({f"{P}/fenced": "4"}, False),
    ],
)
def test_what_is_a_first_copy_as_the_chart_entry_reads_it(labels: dict[str, str], first: bool) -> None:
    obj = flink_deployment(checkpoint_dir="s3://bkt/ckpt", labels=labels)
    assert unlabelled(FlinkResource.from_object(obj), None, policy_from_dict({})) is first
    plain = FlinkResource.from_object(flink_deployment(checkpoint_dir="s3://bkt/ckpt"))
    # an UPDATE that drops the trigger labels (sent by the old ones) keeps the keeper of the copy it
    # becomes; a stale copy the agent stopped stays as it is
    fenced = f"{P}/fenced" in labels
    assert unlabelled(plain, FlinkResource.from_object(obj), policy_from_dict({})) is not fenced


def test_no_lease_without_a_checkpoint_directory_nor_for_a_session_cluster() -> None:
    assert _part(flink_deployment(), None) is None
    assert _part(flink_deployment(checkpoint_dir="s3://bkt/ckpt", job=None), None) is None
    # the policy's default directory is the job's, as the agent reads it
    defaulted = _part(flink_deployment(), None, defaultCheckpointDir="s3://bkt/default")
    assert defaulted is not None and "s3://bkt/default" in defaulted.warnings[0]
