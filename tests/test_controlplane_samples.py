"""The hand-written samples answer as their README says, through the real CLI entry point."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from tests.conftest import REPO
from webhook.cli import main

SAMPLES = REPO / "tests" / "samples" / "controlplane"
BINDINGS = SAMPLES / "bindings.yaml"
P = "flink-failover.io/"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def flink_metadata(review: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    work = review["request"]["object"]
    response = answer["response"]
    if "patch" in response:
        work = jsonpatch.apply_patch(work, json.loads(base64.b64decode(response["patch"])))
    (manifest,) = [m for m in work["spec"]["workload"]["manifests"] if m["kind"].startswith("Flink")]
    meta: dict[str, Any] = manifest["metadata"]
    return meta


def answer(capsys: pytest.CaptureFixture[str], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    path = SAMPLES / name
    code, out, err = run(capsys, "review", "--role", "control-plane", "--objects", str(BINDINGS), str(path))
    assert code == 0, err
    result = json.loads(out)
    assert result["response"]["allowed"] is True
    return json.loads(path.read_text()), result


def ours(mapping: dict[str, str]) -> dict[str, str]:
    return {k[len(P) :]: v for k, v in mapping.items() if k.startswith(P)}


def test_relocating(capsys: pytest.CaptureFixture[str]) -> None:
    review, result = answer(capsys, "review-create-relocating.json")
    meta = flink_metadata(review, result)
    assert ours(meta["labels"]) == {"failover": "true", "job-id": "6e2b9d0f4a1c8e7b5d3f2a1c0b9e8d7f"}
    assert ours(meta["annotations"]) == {
        "source-cluster": "eu-west",
        "failover-time": "2026-11-20T08:15:02Z",
        "failover-count": "1",
        "reason": "TaintUntolerated",
        "last-savepoint": "s3://flink-state/fraud-detector/savepoints/savepoint-6e2b9d-4f1a2b3c4d5e",
    }
    assert meta["labels"]["app"] == "fraud-detector"  # nothing else touched


def test_task_expired(capsys: pytest.CaptureFixture[str]) -> None:
    review, result = answer(capsys, "review-create-task-expired.json")
    meta = flink_metadata(review, result)
    assert ours(meta["labels"])["job-id"] == "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"
    assert ours(meta["annotations"])["failover-time"] == "2026-11-20T08:15:02Z"


def test_restored_running_keeps_the_failover_visible(capsys: pytest.CaptureFixture[str]) -> None:
    review, result = answer(capsys, "review-update-restored-running.json")
    meta = flink_metadata(review, result)
    assert ours(meta.get("labels", {})) == {}  # the trigger labels are gone once the restored job ran
    assert ours(meta["annotations"]) == {
        "source-cluster": "eu-west",
        "failover-time": "2026-11-20T08:16:00Z",
        "failover-count": "1",
        "reason": "ApplicationFailure",
    }


@pytest.mark.parametrize(
    "name",
    [
        "review-update-cluster-left.json",
        "review-create-namespace.json",
    ],
)
def test_no_patch(capsys: pytest.CaptureFixture[str], name: str) -> None:
    _, result = answer(capsys, name)
    assert set(result["response"]) == {"uid", "allowed"}


def test_print_object(capsys: pytest.CaptureFixture[str]) -> None:
    path = SAMPLES / "review-create-relocating.json"
    code, out, _ = run(
        capsys, "review", "--role", "control-plane", "--objects", str(BINDINGS), "--print-object", str(path)
    )
    assert code == 0
    work = json.loads(out)
    assert work["spec"]["workload"]["manifests"][0]["metadata"]["labels"][P + "failover"] == "true"


def test_bad_objects_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = str(SAMPLES / "review-create-relocating.json")
    assert run(capsys, "review", "--role", "control-plane", path)[0] == 2  # --objects missing
    not_rbs = tmp_path / "works.yaml"
    not_rbs.write_text("apiVersion: work.karmada.io/v1alpha1\nkind: Work\nmetadata: {name: x}\n")
    code, _, err = run(capsys, "review", "--role", "control-plane", "--objects", str(not_rbs), path)
    assert code == 2 and "not a ResourceBinding" in err
    missing = tmp_path / "nope.yaml"
    assert run(capsys, "review", "--role", "control-plane", "--objects", str(missing), path)[0] == 2
    # A JSON List (kubectl get rb -o json) works as well as a YAML stream.
    import yaml

    as_list = tmp_path / "rbs.json"
    docs = [d for d in yaml.safe_load_all(BINDINGS.read_text()) if d]
    as_list.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    code, out, _ = run(capsys, "review", "--role", "control-plane", "--objects", str(as_list), path)
    assert code == 0 and "patch" in json.loads(out)["response"]


def test_the_samples_readme_says_what_each_review_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 17 item 13: the README's "expected" column matches the answers (before: a sample the README
    said got no patch was patched)."""
    rows = [
        line.split("|")[1:4]
        for line in (SAMPLES / "README.md").read_text().splitlines()
        if line.startswith("| `review-")
    ]
    assert len(rows) == len(list(SAMPLES.glob("review-*.json")))
    for name, _binding, expected in rows:
        _, result = answer(capsys, name.strip().strip("`"))
        patched = "patch" in result["response"]
        assert patched == (not expected.strip().startswith("no patch")), (name, expected)
