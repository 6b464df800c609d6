"""`flink-failover review`: the offline path gives the server's answers for the shipped samples."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.samples.make_storage import EMPTY, RESTORABLE, make
from tests.support.server import executable

SAMPLES = REPO / "tests" / "samples"
CKPT = "file:///tmp/flink-failover-samples/checkpoints"


@pytest.fixture(scope="module", autouse=True)
def sample_storage() -> None:
    make()


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [executable(), "review", *args], capture_output=True, text=True, input=stdin, cwd=REPO
    )


def answer(sample: str) -> dict:
    result = run(str(SAMPLES / sample))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["response"]


def test_failover_create_sample() -> None:
    resp = answer("failover-create.json")
    assert resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(resp["patch"]))
    paths = {op["path"]: op.get("value") for op in ops}
    assert paths["/spec/job/initialSavepointPath"] == f"{CKPT}/{RESTORABLE}/chk-8"
    assert paths["/spec/job/upgradeMode"] == "last-state"
    assert paths["/metadata/annotations/flink-failover.io~1restore-decision"] == "restored"


def test_print_object_applies_the_patch() -> None:
    result = run(str(SAMPLES / "failover-create.json"), "--print-object")
    assert result.returncode == 0, result.stderr
    obj = json.loads(result.stdout)
    assert obj["spec"]["job"]["initialSavepointPath"] == f"{CKPT}/{RESTORABLE}/chk-8"
    assert obj["metadata"]["annotations"]["flink-failover.io/restored-job-id"] == RESTORABLE
    assert obj["metadata"]["annotations"]["flink-failover.io/source-cluster"] == "member1"  # kept


def test_reapply_update_sample_restores_the_fields_from_old_object() -> None:
    sample = json.loads((SAMPLES / "karmada-reapply-update.json").read_text())
    result = run(str(SAMPLES / "karmada-reapply-update.json"), "--print-object")
    assert json.loads(result.stdout) == sample["request"]["oldObject"]


def test_session_bad_and_empty_samples() -> None:
    assert answer("session-cluster.json") == {"uid": "11111111-0000-4000-8000-000000000003", "allowed": True}
    bad = answer("bad-job-id.json")
    assert bad["allowed"] is False and "32 lowercase hex" in bad["status"]["message"]
    empty = answer("nothing-restorable.json")
    ops = json.loads(base64.b64decode(empty["patch"]))
    assert {"op": "add", "path": "/spec/job/state", "value": "suspended"} in ops
    assert EMPTY in empty["warnings"][0]


def test_stdin_and_unusable_input() -> None:
    text = (SAMPLES / "session-cluster.json").read_text()
    assert run("-", stdin=text).returncode == 0
    bad = run("-", stdin="{not json")
    assert bad.returncode == 2 and "neither JSON nor YAML" in bad.stderr
    notreview = run("-", stdin='{"kind": "Pod"}')
    assert notreview.returncode == 2 and "not an AdmissionReview" in notreview.stderr
    missing = run("/nonexistent.json")
    assert missing.returncode == 2 and "cannot read" in missing.stderr


def test_invalid_policy_names_the_field(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\nonMissingState: pray\n")
    result = run(str(SAMPLES / "session-cluster.json"), "--policy", str(policy))
    assert result.returncode == 2 and "onMissingState" in result.stderr and "pray" in result.stderr
    policy.write_text("apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\nprefered: newest\n")
    result = run(str(SAMPLES / "session-cluster.json"), "--policy", str(policy))
    assert result.returncode == 2 and "prefered" in result.stderr and "unknown field" in result.stderr


def test_invalid_policy_stops_the_server(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\ndeadlineSeconds: 99\n")
    result = subprocess.run(
        [
            executable(),
            "serve",
            "--policy",
            str(policy),
            "--cert-dir",
            str(tmp_path),
            "--bind",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "deadlineSeconds" in result.stderr


@pytest.mark.parametrize("flag", ["--print-object", "--diff"])
def test_without_the_review_extra_applying_the_patch_is_refused_by_name(flag: str) -> None:
    """jsonpatch is the ``review`` extra: without it the answer itself is still given, and the flags that
    apply the patch say which extra to install instead of a traceback."""
    code = (
        "import sys; sys.modules['jsonpatch'] = None\n"  # as if the extra were not installed
        "from webhook.cli import main; sys.exit(main(sys.argv[1:]))\n"
    )
    sample = str(SAMPLES / "failover-create.json")
    missing = subprocess.run(
        [sys.executable, "-c", code, "review", sample, flag], capture_output=True, text=True, cwd=REPO
    )
    assert missing.returncode == 2 and "pip install 'flink-failover[review]'" in missing.stderr
    assert "Traceback" not in missing.stderr
    plain = subprocess.run(
        [sys.executable, "-c", code, "review", sample], capture_output=True, text=True, cwd=REPO
    )
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["response"]["allowed"] is True
