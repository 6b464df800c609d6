from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask import Flask

from tests.placement import validator
from webhook.cli import main
from webhook.placement.api import clusters_from_json
from webhook.placement.components import load_workload
from webhook.placement.http import blueprint

WORKLOAD = {
    "apiVersion": "flink.apache.org/v1beta1",
    "kind": "FlinkDeployment",
    "metadata": {"name": "orders"},
    "spec": {
        "job": {"parallelism": 4},
        "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "2"},
        "jobManager": {"resource": {"cpu": 1, "memory": "2048m"}},
        "taskManager": {"resource": {"cpu": 2, "memory": "4g"}},
    },
}
CLUSTERS = {
    "clusters": [
        {
            "name": "member1",
            "nodes": [
                {
                    "name": "n1",
                    "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                    "requested": {"cpu": "1"},
                },
                {"name": "n2", "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
            ],
        },
        {
            "name": "member2",
            "nodes": [{"name": "m1", "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}],
        },
    ]
}


def write(tmp: Path, name: str, doc: Any) -> str:
    path = tmp / name
    path.write_text(yaml.safe_dump(doc) if name.endswith(".yaml") else json.dumps(doc))
    return str(path)


def check_shape(result: dict[str, Any], witness: bool) -> None:
    assert set(result) == {"components", "clusters", "selected"}
    assert result["components"] == [
        {"name": "jobmanager", "replicas": 1, "requests": {"cpu": "1", "memory": "2Gi"}},
        {"name": "taskmanager", "replicas": 2, "requests": {"cpu": "2", "memory": "4Gi"}},
    ]
    by_name = {row["name"]: row for row in result["clusters"]}
    assert [row["name"] for row in result["clusters"]] == ["member1", "member2"]
    for row in result["clusters"]:
        allowed = {"name", "sets", "upperBound", "elapsedMs", "assignment", "reason", "limit"}
        assert set(row) <= allowed and {"name", "sets", "upperBound", "elapsedMs", "limit"} <= set(row)
        assert set(row["limit"]) == {"code", "resource", "message"} and row["limit"]["message"]
        assert isinstance(row["elapsedMs"], float) and row["elapsedMs"] >= 0
        assert ("assignment" in row) == witness
    assert by_name["member1"]["sets"] == 2  # 11 cores free: 2 x (1 + 2 x 2) = 10
    assert by_name["member2"]["sets"] == 0
    assert result["selected"] == "member1"
    assert "reason" not in by_name["member1"] and by_name["member2"]["reason"]
    assert by_name["member2"]["limit"]["resource"] == "cpu"  # 2 cores, a set needs 5: cpu runs out first
    if witness:
        comps = load_workload(WORKLOAD)
        (member1, _) = clusters_from_json(CLUSTERS["clusters"])
        validator.check(member1, comps, by_name["member1"]["sets"], by_name["member1"]["assignment"])


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = write(tmp_path, "fd.yaml", WORKLOAD)
    clusters = write(tmp_path, "clusters.json", CLUSTERS)
    assert (
        main(["placement", "--workload", workload, "--clusters", clusters, "--format", "json", "--witness"])
        == 0
    )
    check_shape(json.loads(capsys.readouterr().out), witness=True)
    assert main(["placement", "--workload", workload, "--clusters", clusters, "--format", "json"]) == 0
    check_shape(json.loads(capsys.readouterr().out), witness=False)


def test_cli_max_sets_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = write(tmp_path, "fd.yaml", WORKLOAD)
    clusters = write(tmp_path, "clusters.yaml", CLUSTERS)
    assert (
        main(
            [
                "placement",
                "--workload",
                workload,
                "--clusters",
                clusters,
                "--max-sets",
                "1",
                "--format",
                "json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["clusters"][0]["sets"] == 1
    assert main(["placement", "--workload", workload, "--clusters", clusters]) == 0
    out = capsys.readouterr().out
    assert "selected: member1" in out and "component taskmanager: 2 x (cpu=2, memory=4Gi)" in out


@pytest.mark.parametrize(
    ("workload", "clusters", "message"),
    [
        (
            WORKLOAD,
            {"clusters": [{"name": "x", "nodes": [{"name": "n", "allocatable": {"cpu": "8 cores"}}]}]},
            "malformed quantity '8 cores'",
        ),
        (WORKLOAD, {"clusters": [{"name": "x", "nodez": []}]}, "unknown field 'nodez'"),
        (
            {**WORKLOAD, "spec": {"taskManager": {"resource": {"memory": "4 GiB"}}}},
            CLUSTERS,
            "spec.taskManager.resource.memory",
        ),
    ],
)
def test_cli_bad_input_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workload: Any, clusters: Any, message: str
) -> None:
    w = write(tmp_path, "w.yaml", workload)
    c = write(tmp_path, "c.yaml", clusters)
    assert main(["placement", "--workload", w, "--clusters", c]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = write(tmp_path, "w.yaml", WORKLOAD)
    assert main(["placement", "--workload", w, "--clusters", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.fixture
def client() -> Any:
    app = Flask("test")
    app.register_blueprint(blueprint)
    return app.test_client()


def test_http_placement(client: Any) -> None:
    response = client.post("/placement", json={"workload": WORKLOAD, "clusters": CLUSTERS, "witness": True})
    assert response.status_code == 200
    check_shape(response.get_json(), witness=True)
    response = client.post(
        "/placement", json={"workload": WORKLOAD, "clusters": CLUSTERS["clusters"], "maxSets": 1}
    )
    assert response.status_code == 200
    assert response.get_json()["clusters"][0]["sets"] == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (json.dumps({"workload": WORKLOAD}).encode(), "request.clusters: required"),
        (
            json.dumps({"workload": WORKLOAD, "clusters": CLUSTERS, "extra": 1}).encode(),
            "unknown field 'extra'",
        ),
        (json.dumps({"workload": {"kind": "Deployment"}, "clusters": CLUSTERS}).encode(), "not a workload"),
        (json.dumps({"workload": WORKLOAD, "clusters": CLUSTERS, "maxSets": -1}).encode(), "maxSets"),
    ],
)
def test_http_bad_input_400(client: Any, body: bytes, message: str) -> None:
    response = client.post("/placement", data=body, content_type="application/json")
    assert response.status_code == 400
    assert message in response.get_json()["error"]
