"""The chart's values schema is generated from the server's policy model, and helm refuses every policy the
server would refuse (a typo fails ``helm install`` instead of crash-looping the pods)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.schema import SCHEMA_PATH
from tests.chart.schema import render as render_schema
from tests.chart.test_chart import one, render, template
from webhook.member.policy import PolicyError, policy_from_dict


def test_committed_schema_is_the_generated_one() -> None:
    committed = SCHEMA_PATH.read_text(encoding="utf-8")
    assert json.loads(committed) == json.loads(render_schema()), "run: python -m tests.chart.schema"
    assert committed == render_schema()


def server_accepts(policy: dict[str, Any]) -> bool:
    try:
        policy_from_dict({"apiVersion": "flink-failover.io/v1alpha1", "kind": "RestorePolicy", **policy})
    except PolicyError:
        return False
    return True


# Every documented policy value (README "Restore policy", values.yaml) and the near misses a user types.
GOOD: list[dict[str, Any]] = [
    {"defaultCheckpointDir": "s3://bucket/checkpoints"},
    {"defaultCheckpointDir": "s3p://bucket/checkpoints", "defaultSavepointDir": "s3a://bucket/savepoints"},
    {"defaultCheckpointDir": "gs://bucket/chk"},
    {"allowedSchemes": ["hdfs"], "defaultCheckpointDir": "hdfs://namenode:8020/flink/chk"},
    {"defaultCheckpointDir": "abfss://container@account.dfs.core.windows.net/chk"},
    {"defaultCheckpointDir": "oss://bucket/chk"},
    {"defaultCheckpointDir": "file:///data/chk"},
    {"defaultCheckpointDir": "/data/chk"},
    {"allowedSchemes": ["s3"], "defaultCheckpointDir": "s3://b/c"},
    {"allowedSchemes": ["wasbs", "file"]},
    {"prefer": "checkpoint"},
    {"prefer": "savepoint"},
    {"onMissingState": "deny"},
    {"onMissingState": "allow"},
    {"onStorageError": "suspend"},
    {"upgradeMode": "keep"},
    {"upgradeMode": "savepoint"},
    {"upgradeMode": "last-state"},
    {"state": "running"},
    {"deadlineSeconds": 0.5},
    {"deadlineSeconds": 12},
    {"storageOptions": {"s3": {"endpoint_url": "http://minio:9000"}}},
    {"jobIdLabels": ["example.com/old-job"]},
    {"prefix": "failover.example.com"},
    {"fencing": {"leaseSeconds": 70, "pollSeconds": 10, "renewDeadlineSeconds": 30, "stopMarginSeconds": 20}},
    {"fencing": {"leaseSeconds": 300, "pollSeconds": 0.5, "onRenewFailure": "keep-running"}},
]
BAD: list[dict[str, Any]] = [
    {"defaultCheckpointDir": "notauri"},
    {"defaultCheckpointDir": "s3:/bucket/chk"},
    {"defaultCheckpointDir": "s3:///chk"},
    {"defaultCheckpointDir": "ftp://host/chk"},
    {"defaultSavepointDir": "bucket/savepoints"},
    {"allowedSchemes": ["s3"], "defaultCheckpointDir": "gs://bucket/chk"},
    {"allowedSchemes": ["s3"], "defaultSavepointDir": "/data/sp"},
    {"allowedSchemes": ["s4"]},
    {"prefer": "latest"},
    {"onMissingState": "ignore"},
    {"upgradeMode": "stateless"},
    {"state": "suspended"},
    {"deadlineSeconds": 0},
    {"deadlineSeconds": -1},
    {"deadlineSeconds": "5"},
    {"storageOptions": {"s4": {}}},
    {"storageOptions": {"s3": "endpoint"}},
    {"jobIdLabels": ["not a label"]},
    {"prefix": "Flink_Failover"},
    {"prefx": "flink-failover.io"},
    # issue 24: the chart rendered these (exit 0) and the pods crash-looped on them
    {"fencing": {"pollSeconds": 20}},
    {"fencing": {"leaseSeconds": 10, "pollSeconds": 5}},
    {"fencing": {"renewDeadlineSeconds": 20}},
    # issue 28: no slack left (the old default), and a deadline one failed renewal would reach
    {"fencing": {"renewDeadlineSeconds": 15}},
    {"fencing": {"leaseSeconds": 60, "pollSeconds": 10, "renewDeadlineSeconds": 30, "stopMarginSeconds": 20}},
    {"fencing": {"renewDeadlineSeconds": 8}},
    {"fencing": {"leaseSeconds": 20, "pollSeconds": 2, "renewDeadlineSeconds": 5, "stopMarginSeconds": 14}},
    {"fencing": {"onRenewFailure": "continue"}},
    {"fencing": {"renewDeadlineSeconds": 0}},
    {"storageOptions": {"s3": {"anon": "false"}}},
    {"storageOptions": {"file": {"auto_mkdir": 1}}},
]
# Refused by the chart although the server would start with them: nothing could ever be restored or
# triggered, or the webhook's timeoutSeconds (at most 30) could not exceed the deadline.
CHART_STRICTER: list[dict[str, Any]] = [
    {"allowedSchemes": []},
    {"jobIdLabels": []},
    {"deadlineSeconds": 30},
    {"jobIdLabels": None},
    {"prefix": None},
]


@pytest.mark.parametrize("policy", GOOD, ids=lambda p: json.dumps(p))
def test_documented_values_render_a_policy_the_server_loads(
    helm: str, tmp_path: Path, policy: dict[str, Any]
) -> None:
    assert server_accepts(policy)
    docs = render(helm, tmp_path, {"policy": policy})
    rendered = yaml.safe_load(one(docs, "ConfigMap")["data"]["restore-policy.yaml"])
    loaded = policy_from_dict(rendered)  # the server's own validator
    for key, value in policy.items():
        assert rendered[key] == value or rendered[key] == {**rendered[key], **value}  # a merged block
    assert loaded.deadline_seconds > 0


@pytest.mark.parametrize("policy", BAD, ids=lambda p: json.dumps(p))
def test_a_policy_the_server_refuses_fails_helm_template(
    helm: str, tmp_path: Path, policy: dict[str, Any]
) -> None:
    assert not server_accepts(policy)
    result = template(helm, tmp_path, {"policy": policy})
    assert result.returncode != 0, f"helm rendered a policy the server refuses: {policy}"
    key = next(iter(policy))
    # the error points at the key (helm's validator reports a bad map key as the key itself)
    assert key in result.stderr or any(str(k) in result.stderr for k in policy[key]), result.stderr


@pytest.mark.parametrize("policy", CHART_STRICTER, ids=lambda p: json.dumps(p))
def test_chart_refuses_policies_that_cannot_work(helm: str, tmp_path: Path, policy: dict[str, Any]) -> None:
    result = template(helm, tmp_path, {"policy": policy})
    assert result.returncode != 0
    key = next(iter(policy))
    assert "/policy" in result.stderr and key in result.stderr, result.stderr
    assert "nil pointer" not in result.stderr


@pytest.mark.parametrize(
    "values",
    [{"member": {"webhook": None}}, {"controlPlane": {"part": None}}, {"certificates": {"mode": None}}],
    ids=lambda v: json.dumps(v),
)
def test_a_deleted_key_is_a_schema_error_not_a_template_crash(
    helm: str, tmp_path: Path, values: dict[str, Any]
) -> None:
    result = template(helm, tmp_path, values)
    assert result.returncode != 0
    assert "missing propert" in result.stderr and "nil pointer" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("fencing", "named"),
    [
        ({"pollSeconds": 20}, "pollSeconds 20 is more than half of policy.fencing.leaseSeconds 30"),
        ({"renewDeadlineSeconds": 16}, "renewDeadlineSeconds 16 + pollSeconds 5 + stopMarginSeconds 10"),
        ({"renewDeadlineSeconds": 15}, "leaves less than one pollSeconds of slack in leaseSeconds 30"),
        ({"renewDeadlineSeconds": 8}, "renewDeadlineSeconds 8 is less than two pollSeconds"),
    ],
)
def test_fencing_timings_fail_helm_with_the_servers_reason(
    helm: str, tmp_path: Path, fencing: dict[str, Any], named: str
) -> None:
    values = {"member": {"fencing": {"cluster": "member1"}}, "policy": {"fencing": fencing}}
    result = template(helm, tmp_path, values)
    assert result.returncode != 0 and named in result.stderr, result.stderr
    assert not server_accepts({"fencing": fencing})


def test_fencing_timings_at_the_limit_render() -> None:
    """The bounds are inclusive: renew = 2 x poll and renew + poll + margin + one poll of slack = lease
    pass; a little more (or a little less deadline) does not."""
    assert server_accepts({"fencing": {"leaseSeconds": 30, "pollSeconds": 5, "renewDeadlineSeconds": 10}})
    assert not server_accepts(
        {"fencing": {"leaseSeconds": 30, "pollSeconds": 5, "renewDeadlineSeconds": 10.5}}
    )
    assert not server_accepts(
        {"fencing": {"leaseSeconds": 30, "pollSeconds": 5, "renewDeadlineSeconds": 9.5}}
    )
    wide = {"leaseSeconds": 50, "pollSeconds": 10, "renewDeadlineSeconds": 20, "stopMarginSeconds": 10}
    assert server_accepts({"fencing": wide})
    assert not server_accepts({"fencing": {**wide, "stopMarginSeconds": 10.5}})
