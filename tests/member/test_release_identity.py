"""Only the fencing agent releases a held job, and the webhook fails closed wherever it cannot know who
the agent is: the identity is learnt from the API server (a SelfSubjectReview) when ``--agent-user`` is
not given, and a ``released`` marker from anyone else keeps the job held, served and offline alike.

Before issue 28, a member role run with ``--kubeconfig`` (as outside a pod) or an offline ``review``
knew no identity and accepted the markers from anyone: user alice PUT a held restore with
``state: running`` and a forged ``released``, and it was admitted running, silently.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import fakeapi
from tests.support.objects import JOB_ID, apply, decode_patch, flink_deployment, make_checkpoints, review
from tests.support.production import wait_for
from tests.support.server import generate_certs, serve
from webhook.cli import main
from webhook.common.kubeclient import ApiFailure
from webhook.member.identity import RETRY_SECONDS, AgentIdentity

P = "flink-failover.io"
HOLD, RELEASED = f"{P}/hold", f"{P}/released"


def held_restore(root: Path) -> dict[str, Any]:
    """A restore admitted held (as the member webhook left it), waiting for member1."""
    obj = flink_deployment(
        labels={f"{P}/failover": "true", f"{P}/job-id": JOB_ID},
        annotations={
            f"{P}/failover-count": "1",
            f"{P}/restore-decision": "held",
            f"{P}/restored-from": str(root / JOB_ID / "chk-2"),
            f"{P}/restored-job-id": JOB_ID,
            f"{P}/epoch": "1",
            HOLD: "epoch 1: waiting for member1 to stop; ...",
        },
    )
    obj["spec"]["job"]["state"] = "suspended"
    obj["spec"]["job"]["initialSavepointPath"] = str(root / JOB_ID / "chk-2")
    return obj


def forged(held: dict[str, Any]) -> dict[str, Any]:
    """What an ordinary user PUTs: the agent's release markers, made up."""
    out = copy.deepcopy(held)
    out["spec"]["job"]["state"] = "running"
    out["metadata"]["annotations"][RELEASED] = "ack at 2026-12-01T00:00:00Z"
    del out["metadata"]["annotations"][HOLD]
    return out


def _policy(tmp_path: Path, root: Path) -> Path:
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"defaultCheckpointDir: {root}\n", encoding="utf-8")
    return policy


@pytest.mark.parametrize("reviews", ["answered", "refused"])
def test_a_served_role_learns_the_agents_identity_and_keeps_a_forged_release_held(
    tmp_path: Path, reviews: str
) -> None:
    root = tmp_path / "checkpoints"
    make_checkpoints(root / JOB_ID, [1, 2])
    member = fakeapi.start_member_cluster()
    member.fake.fail_self_reviews = reviews == "refused"  # an API server older than 1.28
    try:
        kubeconfig = member.kubeconfig(tmp_path / "member2.kubeconfig")
        extra = ["--cluster", "member2", "--kubeconfig", str(kubeconfig), "--workers", "1"]
        log_file = tmp_path / "server.log"
        with serve(
            generate_certs(tmp_path / "certs"), _policy(tmp_path, root), log_file, extra=extra
        ) as server:
            held = held_restore(root)
            forgery = forged(held)
            answer = server.client().admit(review(forgery, operation="UPDATE", old=held, user="alice"))
            kept = apply(forgery, decode_patch(answer["response"]))
            assert kept["spec"]["job"]["state"] == "suspended"  # before: running, admitted silently
            assert kept["metadata"]["annotations"][HOLD] == held["metadata"]["annotations"][HOLD]
            assert kept["metadata"]["annotations"][RELEASED] == ""  # the forged marker does not stay
            warnings = answer["response"].get("warnings", [])
            assert any("set by alice ignored" in w for w in warnings), warnings
            assert wait_for(lambda: "ReleaseIgnored" in member.event_reasons()), member.events

            agent = fakeapi.DEFAULT_USER  # who the agent's requests are authenticated as
            answer = server.client().admit(review(forgery, operation="UPDATE", old=held, user=agent))
            after = apply(forgery, decode_patch(answer["response"]))
            if reviews == "answered":
                assert after["spec"]["job"]["state"] == "running"  # the agent's own release
                assert member.fake.self_reviews >= 1
            else:  # nobody's markers count while the identity is unknown: fail closed, and say so
                assert after["spec"]["job"]["state"] == "suspended"
                warnings = answer["response"].get("warnings", [])
                assert any("identity is not known here" in w for w in warnings), warnings
        lines = [json.loads(line) for line in log_file.read_text().splitlines() if line.startswith("{")]
        said = [e for e in lines if "release markers accepted from" in e.get("msg", "")]
        unknown = [e for e in lines if "identity is unknown" in e.get("msg", "")]
        if reviews == "answered":
            assert said and agent in said[0]["msg"] and "SelfSubjectReview" in said[0]["msg"]
        else:
            assert unknown and unknown[0]["level"] == "error", lines[-5:]
    finally:
        member.stop()


def test_offline_review_keeps_a_forged_release_held_unless_told_the_agents_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "checkpoints"
    make_checkpoints(root / JOB_ID, [1, 2])
    held = held_restore(root)
    request = tmp_path / "update.json"
    request.write_text(json.dumps(review(forged(held), operation="UPDATE", old=held, user="alice")))
    policy = str(_policy(tmp_path, root))

    assert main(["review", str(request), "--policy", policy, "--print-object"]) == 0
    assert json.loads(capsys.readouterr().out)["spec"]["job"]["state"] == "suspended"  # before: running
    assert main(["review", str(request), "--policy", policy, "--agent-user", "bob", "--print-object"]) == 0
    assert json.loads(capsys.readouterr().out)["spec"]["job"]["state"] == "suspended"
    # Reviewing the agent's own release: name the agent's user.
    assert main(["review", str(request), "--policy", policy, "--agent-user", "alice", "--print-object"]) == 0
    assert json.loads(capsys.readouterr().out)["spec"]["job"]["state"] == "running"


def test_the_identity_is_asked_again_while_unknown_and_kept_once_known() -> None:
    now = [0.0]
    answers: list[str | ApiFailure] = [ApiFailure(0, "connection refused"), "system:serviceaccount:ns:agent"]
    asked: list[float] = []

    def review_self() -> str | ApiFailure:
        asked.append(now[0])
        return answers.pop(0)

    identity = AgentIdentity(review=review_self, clock=lambda: now[0])
    first = identity.learn()
    assert first.users is None and "connection refused" in first.source
    assert not identity.current().accepts("system:serviceaccount:ns:agent")
    now[0] += RETRY_SECONDS / 2
    identity.current()
    assert asked == [0.0]  # not asked again before the retry period
    now[0] += RETRY_SECONDS
    identity.learn()
    known = identity.current()
    assert (
        known.users == frozenset({"system:serviceaccount:ns:agent"}) and known.source == "SelfSubjectReview"
    )
    assert known.accepts("system:serviceaccount:ns:agent") and not known.accepts("alice")
    assert len(asked) == 2


def test_given_users_win_and_a_pods_token_is_the_fallback() -> None:
    assert AgentIdentity(frozenset({"a"})).current().users == frozenset({"a"})
    refused = AgentIdentity(
        review=lambda: ApiFailure(404, "no such resource"), token="system:serviceaccount:x:y"
    )
    assert refused.learn().users == frozenset({"system:serviceaccount:x:y"})
    assert AgentIdentity().current().users is None  # nothing to go by: nobody
