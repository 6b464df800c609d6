"""FlinkBlueGreenDeployment (operator 1.14+) through the served webhook (gunicorn, TLS), checked against
the upstream 1.15.0 CRDs and built from the operator's own blue/green example."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.crds import crd_validator
from tests.support.objects import apply, decode_patch, flink_metadata, review
from tests.support.server import RunningServer

pytestmark = pytest.mark.shared

JOB_ID = "7e1f0c2d3b4a59687766554433221100"
FAILOVER = "flink-failover.io/failover"
JOB_LABEL = "flink-failover.io/job-id"
STARTED_FROM = "flink-failover.io/started-from"


@pytest.fixture(scope="module")
def crds(shared_data: Path) -> Path:
    return shared_data / "crds" / "flink-operator-1.15.0"


@pytest.fixture(scope="module")
def validate(crds: Path) -> Any:
    validators = {
        "FlinkBlueGreenDeployment": crd_validator(
            crds / "flinkbluegreendeployments.flink.apache.org-v1.yml", "v1beta1"
        ),
        "FlinkDeployment": crd_validator(crds / "flinkdeployments.flink.apache.org-v1.yml", "v1beta1"),
    }

    def check(obj: dict[str, Any]) -> None:
        errors = [e.message for e in validators[obj["kind"]].iter_errors(obj)]
        assert not errors, errors

    return check


def parent(crds: Path, state_root: Path, example: str = "laststate", **labels: str) -> dict[str, Any]:
    """The operator's blue/green example, its storage moved to ``state_root``, labelled for failover."""
    (obj, *_rest) = yaml.safe_load_all((crds / f"example-bluegreen-{example}.yaml").read_text())
    obj["metadata"]["namespace"] = "analytics"
    obj["metadata"]["labels"] = dict(labels)
    conf = obj["spec"]["template"]["spec"]["flinkConfiguration"]
    conf["state.checkpoints.dir"] = f"file://{state_root}/flink-cp"
    conf["state.savepoints.dir"] = f"file://{state_root}/flink-sp"
    return dict(obj)


def child(of: dict[str, Any], colour: str) -> dict[str, Any]:
    """The FlinkDeployment the operator creates from the template: its name, one label of its own
    (none of the parent's, FLINK-41403), an ownerReference to the parent."""
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {
            "name": f"{of['metadata']['name']}-{colour}",
            "namespace": of["metadata"]["namespace"],
            "labels": {"DeploymentType": colour.upper()},
            "ownerReferences": [
                {
                    "apiVersion": "flink.apache.org/v1beta1",
                    "kind": "FlinkBlueGreenDeployment",
                    "name": of["metadata"]["name"],
                    "uid": "0f1e2d3c-0000-4000-8000-000000000001",
                    "controller": False,
                }
            ],
        },
        "spec": copy.deepcopy(of["spec"]["template"]["spec"]),
    }


def write(path: Path, checkpoint_id: int) -> str:
    path.mkdir(parents=True, exist_ok=True)
    (path / "_metadata").write_bytes(flink_metadata(checkpoint_id))
    return f"file://{path}"


def test_a_failed_over_blue_green_deployment_resumes_from_the_newest_state_of_the_job_that_ran_last(
    member_server: RunningServer, crds: Path, validate: Any, tmp_path: Path
) -> None:
    write(tmp_path / "flink-cp" / JOB_ID / "chk-6", 6)
    newest = write(tmp_path / "flink-sp" / f"savepoint-{JOB_ID[:6]}-00aa11bb22cc", 7)
    obj = parent(crds, tmp_path, **{FAILOVER: "true", JOB_LABEL: JOB_ID})
    validate(obj)
    client = member_server.client()
    resp = client.admit(review(obj))["response"]
    assert resp["allowed"] is True, resp
    restored = apply(obj, decode_patch(resp))
    validate(restored)  # nothing the apiserver would prune or refuse
    job = restored["spec"]["template"]["spec"]["job"]
    assert job["initialSavepointPath"] == newest
    assert job["upgradeMode"] == "last-state"  # kept: the template asked for it
    assert restored["metadata"]["annotations"]["flink-failover.io/restored-from"] == newest
    assert "job" not in restored["spec"]  # the parent's own spec has no job: nothing written beside it

    # The operator then creates blue from the template: it carries the path, the webhook leaves it be.
    blue = child(restored, "blue")
    validate(blue)
    answer = client.admit(review(blue))["response"]
    assert answer["allowed"] is True and "patch" not in answer
    assert blue["spec"]["job"]["initialSavepointPath"] == newest

    # Karmada re-applies the template without our fields: they are carried over, storage untouched.
    again = client.admit(review(obj, operation="UPDATE", old=restored))["response"]
    carried = apply(obj, decode_patch(again))
    assert carried["spec"]["template"]["spec"]["job"]["initialSavepointPath"] == newest
    client.close()
    skipped = [line for line in member_server.logs().splitlines() if "restored through its template" in line]
    assert any(json.loads(line).get("path") == newest for line in skipped)


def test_a_blue_green_job_that_never_checkpointed_restores_what_it_started_from(
    member_server: RunningServer, crds: Path, validate: Any, tmp_path: Path
) -> None:
    predecessor = "0a0b0c0d0e0f00000000000000000001"
    start = write(tmp_path / "flink-cp" / predecessor / "chk-11", 11)
    (tmp_path / "flink-cp" / JOB_ID).mkdir(parents=True)
    obj = parent(crds, tmp_path, "stateless", **{FAILOVER: "true", JOB_LABEL: JOB_ID})
    obj["metadata"]["annotations"] = {STARTED_FROM: start}
    client = member_server.client()
    resp = client.admit(review(obj))["response"]
    client.close()
    restored = apply(obj, decode_patch(resp))
    validate(restored)
    assert restored["spec"]["template"]["spec"]["job"]["initialSavepointPath"] == start
    assert any("started from" in w for w in resp["warnings"])


def test_a_child_with_nothing_of_ours_is_never_touched(
    member_server: RunningServer, crds: Path, tmp_path: Path
) -> None:
    obj = parent(crds, tmp_path)
    green = child(obj, "green")
    green["spec"]["job"]["initialSavepointPath"] = "file:///elsewhere/savepoint-7e1f0c-0123456789ab"
    client = member_server.client()
    resp = client.admit(review(green))["response"]
    client.close()
    assert resp["allowed"] is True and "patch" not in resp
