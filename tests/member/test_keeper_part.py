"""The keeper's part of an admission (webhook/member/keeper.py, pure) where the served tests
(test_injected.py, on local files) do not reach: S3 keys only in Flink's configuration, the policy's
storage credentials kept out of the job's pod, and the API server's version as providers spell it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.objects import JOB_ID, apply, flink_deployment
from webhook.common.flink import FlinkResource
from webhook.member.keeper import Admission, KeeperSetup, Keeping, Kept, Sidecars, keeper_part, version_of
from webhook.policy.restore import RestorePolicy, policy_from_dict
from webhook.restore.outcome import RestoreDecision, RestoreOutcome

P = "flink-failover.io"
SETUP = KeeperSetup("registry.example/flink-failover:1.0", "member1", (1, 30))


def part(
    obj: dict[str, Any],
    resource: FlinkResource,
    old: FlinkResource | None,
    decision: RestoreDecision,
    policy: RestorePolicy,
    setup: KeeperSetup,
    old_obj: dict[str, Any] | None = None,
) -> Keeping | None:
    """``keeper_part`` of the admission these make (an UPDATE where there is an old object)."""
    return keeper_part(
        Admission(
            operation="UPDATE" if old is not None else "CREATE",
            obj=obj,
            resource=resource,
            old_obj=old_obj,
            old=old,
            decision=decision,
            policy=policy,
            setup=setup,
        )
    )


def _injected(obj: dict[str, Any], policy_doc: dict[str, Any]) -> dict[str, Any]:
    """The keeper container the admission of a fenced restore at epoch 3 adds."""
    policy = policy_from_dict(policy_doc)
    decision = RestoreDecision(RestoreOutcome.RESTORED, annotations={f"{P}/epoch": "3"}, job_id=JOB_ID)
    keeping = part(obj, FlinkResource.from_object(obj), None, decision, policy, SETUP)
    assert keeping is not None and keeping.kept is Kept.INJECTED, keeping
    (op,) = [op for op in keeping.ops if op["path"] == "/spec/jobManager/podTemplate"]
    (keeper,) = op["value"]["spec"]["initContainers"]
    return keeper


def test_s3_keys_only_in_flinks_configuration_reach_the_keeper_as_the_environment_s3fs_reads() -> None:
    obj = flink_deployment(checkpoint_dir="s3://bkt/ckpt")
    obj["spec"]["flinkConfiguration"].update({"s3.access-key": "AKIA1", "s3.secret-key": "shh"})
    env = {e["name"]: e.get("value") for e in _injected(obj, {})["env"]}
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == ("AKIA1", "shh")
    # on another storage they are not the keeper's to use
    obj = flink_deployment(checkpoint_dir="gs://bkt/ckpt")
    obj["spec"]["flinkConfiguration"].update({"s3.access-key": "AKIA1", "s3.secret-key": "shh"})
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & {e["name"] for e in _injected(obj, {})["env"]}


def test_the_policys_own_storage_credentials_never_go_into_the_jobs_pod() -> None:
    options = {
        "endpoint_url": "https://minio.example",
        "key": "webhook-key",
        "secret": "webhook-secret",
        "client_kwargs": {"region_name": "eu-west-1", "aws_secret_access_key": "x"},
        "s3_additional_kwargs": {"SSECustomerKey": "sse-c-key", "ServerSideEncryption": "aws:kms"},
    }
    keeper = _injected(flink_deployment(checkpoint_dir="s3://bkt/ckpt"), {"storageOptions": {"s3": options}})
    policy = next(e["value"] for e in keeper["env"] if e["name"] == "FLINK_FAILOVER_KEEPER_POLICY")
    for secret in ("webhook-secret", "webhook-key", "aws_secret", "sse-c-key"):
        assert secret not in policy
    assert "https://minio.example" in policy and "eu-west-1" in policy and "aws:kms" in policy


@pytest.mark.parametrize(
    ("answer", "version"),
    [
        ({"major": "1", "minor": "29", "gitVersion": "v1.29.3"}, (1, 29)),
        ({"major": "1", "minor": "28+", "gitVersion": "v1.28.15-eks-7f9249a"}, (1, 28)),
        ({"major": "1", "minor": "31+"}, (1, 31)),
    ],
)
def test_the_api_servers_version_as_providers_spell_it(
    answer: dict[str, str], version: tuple[int, int]
) -> None:
    assert version_of(answer) == version


def test_an_unreadable_version_is_said_not_guessed() -> None:
    assert isinstance(version_of({"platform": "linux/amd64"}), str)


def test_a_copy_running_its_keeper_keeps_it_while_the_version_is_not_known() -> None:
    """A worker that just started has not read /version yet: Karmada's re-applied template must not drop
    the sidecar of a copy that runs it (the JobManager would restart without it); a new copy gets none."""
    policy = policy_from_dict({})
    annotations = {f"{P}/epoch": "3"}
    created = RestoreDecision(RestoreOutcome.RESTORED, annotations=annotations, job_id=JOB_ID)
    template = flink_deployment(checkpoint_dir="s3://bkt/ckpt")
    resource = FlinkResource.from_object(template)
    first = part(template, resource, None, created, policy, SETUP)
    assert first is not None and first.kept is Kept.INJECTED
    running = apply(template, list(first.ops))
    unknown = KeeperSetup(SETUP.image, SETUP.cluster, None, "GET /version: connection refused")
    carried = RestoreDecision(RestoreOutcome.RESTORED, annotations=annotations, job_id=JOB_ID, carried=True)
    again = part(template, resource, resource, carried, policy, unknown, running)
    assert again is not None and again.kept is Kept.INJECTED
    assert apply(template, list(again.ops))["spec"]["jobManager"] == running["spec"]["jobManager"]
    new = part(template, resource, None, created, policy, unknown)
    assert new is not None and new.kept is Kept.UNSUPPORTED and "connection refused" in new.warnings[0]


def test_the_clusters_version_is_retried_until_the_api_server_answers() -> None:
    """A worker that starts while its API server does not answer learns the version once it does; until
    then the reason is what the admissions say."""
    from tests.support.production import wait_for
    from webhook.common.kubeclient import ClientConfig
    from webhook.member.kubeversion import ClusterVersion

    answers: list[tuple[int, int] | str] = ["GET /version: connection refused", "GET /version: 503", (1, 30)]
    asked: list[float] = []

    def read(timeout: float) -> tuple[int, int] | str:
        asked.append(timeout)
        return answers[min(len(asked), len(answers)) - 1]

    version = ClusterVersion(ClientConfig(), timeout=2.0, retry_seconds=0.01, read=read)
    assert version.current() == (None, "not read yet")
    version.start()
    try:
        assert wait_for(lambda: version.current()[0] == (1, 30), 30)
    finally:
        version.stop()
    assert len(asked) == 3 and set(asked) == {2.0}  # each try under its deadline; none after it answered


def test_a_copy_guarded_by_its_keeper_is_told_by_its_object() -> None:
    """``common/flink.py`` ``runs_keeper``: what the fencing agent can read of a copy (the sidecar the
    webhook added), for a FlinkDeployment and a FlinkBlueGreenDeployment's template alike."""
    from webhook.common.flink import runs_keeper

    obj = flink_deployment(checkpoint_dir="s3://bkt/ckpt")
    assert not runs_keeper(obj)
    keeper = _injected(obj, {})
    guarded = flink_deployment(checkpoint_dir="s3://bkt/ckpt")
    guarded["spec"]["jobManager"]["podTemplate"] = {"spec": {"initContainers": [keeper]}}
    assert runs_keeper(guarded)
    parent = {"kind": "FlinkBlueGreenDeployment", "spec": {"template": {"spec": guarded["spec"]}}}
    assert runs_keeper(parent)
    mine = {**keeper, "command": ["sleep", "infinity"]}  # a container of its name that is not the keeper
    guarded["spec"]["jobManager"]["podTemplate"] = {"spec": {"initContainers": [mine]}}
    assert not runs_keeper(guarded)


@pytest.mark.parametrize(
    ("sidecars", "version", "kept", "said"),
    [
        (Sidecars.AUTO, (1, 28), Kept.UNSUPPORTED, "1.28, which serves no native sidecars"),
        (Sidecars.AUTO, None, Kept.UNSUPPORTED, "version is not known"),
        (Sidecars.AUTO, (1, 29), Kept.INJECTED, ""),
        (Sidecars.ON, (1, 28), Kept.INJECTED, ""),  # the platform enabled SidecarContainers on 1.28
        (Sidecars.ON, None, Kept.INJECTED, ""),  # the version is not needed
        (Sidecars.OFF, (1, 31), Kept.UNSUPPORTED, "declared not served"),
    ],
)
def test_native_sidecars_declared_or_read_from_the_version(
    sidecars: Sidecars, version: tuple[int, int] | None, kept: Kept, said: str
) -> None:
    """``serve --native-sidecars``: auto reads /version (1.29+); on serves the keeper whatever it says (a
    1.28 cluster with the SidecarContainers feature gate); off adds none, with the Event saying so."""
    obj = flink_deployment(checkpoint_dir="s3://bkt/ckpt")
    decision = RestoreDecision(RestoreOutcome.RESTORED, annotations={f"{P}/epoch": "3"}, job_id=JOB_ID)
    setup = KeeperSetup(SETUP.image, SETUP.cluster, version, "", sidecars)
    keeping = part(obj, FlinkResource.from_object(obj), None, decision, policy_from_dict({}), setup)
    assert keeping is not None and keeping.kept is kept
    if kept is Kept.INJECTED:
        assert any(op["path"] == "/spec/jobManager/podTemplate" for op in keeping.ops)
    else:
        (event,) = keeping.events
        assert not keeping.ops and event.reason == "KeeperNotInjected" and said in event.note
