"""`flink-failover placement` with the inputs a newcomer has: files from PowerShell, standard input, a
FlinkDeployment that is not finished yet, a zero where a count belongs."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.placement.test_interfaces import CLUSTERS, WORKLOAD, write
from webhook.cli import main


def placement(*args: str, stdin: str | None = None, monkeypatch: pytest.MonkeyPatch | None = None) -> int:
    if stdin is not None:
        assert monkeypatch is not None
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-16"))))
    return main(["placement", *args, "--format", "json"])


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig"])
def test_workload_written_by_powershell_or_notepad(
    tmp_path: Path, encoding: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a UnicodeDecodeError traceback."""
    workload = tmp_path / "fd.yaml"
    workload.write_bytes(yaml.safe_dump(WORKLOAD).encode(encoding))
    clusters = tmp_path / "clusters.json"
    clusters.write_bytes(json.dumps(CLUSTERS).encode(encoding))
    assert placement("--workload", str(workload), "--clusters", str(clusters)) == 0
    assert json.loads(capsys.readouterr().out)["selected"] == "member1"


def test_stdin_for_workload_or_clusters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clusters = write(tmp_path, "clusters.yaml", CLUSTERS)
    assert (
        placement(
            "--workload", "-", "--clusters", clusters, stdin=yaml.safe_dump(WORKLOAD), monkeypatch=monkeypatch
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["selected"] == "member1"
    workload = write(tmp_path, "fd.yaml", WORKLOAD)
    assert (
        placement(
            "--workload", workload, "--clusters", "-", stdin=json.dumps(CLUSTERS), monkeypatch=monkeypatch
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["selected"] == "member1"
    assert placement("--workload", "-", "--clusters", "-", stdin="{}", monkeypatch=monkeypatch) == 2
    assert "can be read only once" in capsys.readouterr().err


@pytest.mark.parametrize("part", ["jobManager", "taskManager"])
def test_flinkdeployment_without_resources_is_an_error_not_zero(
    tmp_path: Path, part: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: every cluster fit 0 sets... or unbounded ones: the operator would reject the object."""
    workload: dict[str, Any] = json.loads(json.dumps(WORKLOAD))
    del workload["spec"][part]["resource"]
    path = write(tmp_path, "fd.yaml", workload)
    assert placement("--workload", path, "--clusters", write(tmp_path, "c.json", CLUSTERS)) == 2
    err = capsys.readouterr().err
    assert f"spec.{part} requests no memory" in err and "Traceback" not in err


def test_flinkdeployment_with_flink_33548_resources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator's newer ``resources`` (requests, then limits) places as the older ``resource`` does."""
    workload: dict[str, Any] = json.loads(json.dumps(WORKLOAD))
    for part in ("jobManager", "taskManager"):
        old = workload["spec"][part].pop("resource")
        workload["spec"][part]["resources"] = {"limits": {"cpu": str(old["cpu"]), "memory": old["memory"]}}
    path = write(tmp_path, "fd.yaml", workload)
    assert (
        placement("--workload", path, "--clusters", write(tmp_path, "c.json", CLUSTERS), "--format", "json")
        == 0
    )
    new = json.loads(capsys.readouterr().out)
    assert (
        placement(
            "--workload",
            write(tmp_path, "old.yaml", WORKLOAD),
            "--clusters",
            write(tmp_path, "c2.json", CLUSTERS),
            "--format",
            "json",
        )
        == 0
    )
    old_answer = json.loads(capsys.readouterr().out)
    assert new["components"] == old_answer["components"]
    assert [c["sets"] for c in new["clusters"]] == [c["sets"] for c in old_answer["clusters"]]


def test_max_sets_zero_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        placement(
            "--workload", write(tmp_path, "fd.yaml", WORKLOAD), "--clusters", "c.json", "--max-sets", "0"
        )
    assert exit_.value.code == 2
    assert "--max-sets: must be at least 1" in capsys.readouterr().err


def test_a_blue_green_deployment_places_as_its_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30: refused before ("not a workload"). One set: the steady state, as the shipped
    components customization counts it."""
    clusters = write(tmp_path, "c.json", CLUSTERS)
    assert placement("--workload", write(tmp_path, "fd.yaml", WORKLOAD), "--clusters", clusters) == 0
    plain = _timeless(json.loads(capsys.readouterr().out))
    parent = {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkBlueGreenDeployment",
        "metadata": {"name": "orders"},
        "spec": {"template": {"spec": json.loads(json.dumps(WORKLOAD["spec"]))}},
    }
    assert placement("--workload", write(tmp_path, "bg.yaml", parent), "--clusters", clusters) == 0
    assert _timeless(json.loads(capsys.readouterr().out)) == plain
    del parent["spec"]["template"]["spec"]["taskManager"]
    assert placement("--workload", write(tmp_path, "bg2.yaml", parent), "--clusters", clusters) == 2
    assert "spec.template.spec.taskManager requests no memory" in capsys.readouterr().err


def test_a_session_job_is_refused_with_what_to_place_instead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkSessionJob",
        "metadata": {"name": "clicks"},
        "spec": {"deploymentName": "shared-session", "job": {"jarURI": "local:///job.jar"}},
    }
    clusters = write(tmp_path, "c.json", CLUSTERS)
    assert placement("--workload", write(tmp_path, "job.yaml", job), "--clusters", clusters) == 2
    err = capsys.readouterr().err
    assert "has no pods of its own" in err and "spec.deploymentName: shared-session" in err
    assert "place that FlinkDeployment instead" in err and "not a workload" not in err


def _timeless(result: dict[str, Any]) -> dict[str, Any]:
    return {
        **result,
        "clusters": [{k: v for k, v in c.items() if k != "elapsedMs"} for c in result["clusters"]],
    }
