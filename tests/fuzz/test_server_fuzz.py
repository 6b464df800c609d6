"""Hostile bodies through the real server over HTTPS: 400/413 or a valid AdmissionReview, never a
crash, an internal error or a hang (every request has a client timeout)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.test_admission_fuzz import PATH_TRICKS, json_values
from tests.support.objects import JOB_ID, flink_deployment, review
from tests.support.server import ApiServerClient, RunningServer

CLIENT_TIMEOUT = 20.0  # far above the 2 s deadline: hitting it means the server hung


@pytest.fixture(scope="module")
def client(fuzz_server: RunningServer) -> Iterator[ApiServerClient]:
    c = fuzz_server.client(timeout=CLIENT_TIMEOUT)
    yield c
    c.close()


def post(client: ApiServerClient, body: bytes) -> tuple[int, bytes]:
    status, data, _ = client.request("POST", "/mutate", body)
    assert status in (200, 400, 413), (status, data[:300])
    if status == 200:
        answer = json.loads(data)
        assert answer["kind"] == "AdmissionReview" and answer["apiVersion"].startswith("admission.k8s.io/")
        resp = answer["response"]
        sent = json.loads(body)["request"]["uid"]
        assert resp["uid"] == sent and isinstance(resp["allowed"], bool)
        assert resp.get("status", {}).get("code") != 500, resp
    return status, data


def mutated_reviews() -> st.SearchStrategy[dict[str, Any]]:
    def mutate(args: tuple[list[str], Any, str]) -> dict[str, Any]:
        path, value, job = args
        body = review(
            flink_deployment(labels={"flink-failover.io/failover": "true", "flink-failover.io/job-id": job})
        )
        node: Any = body
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return body

    paths = st.sampled_from(
        [
            ["request", "object"],
            ["request", "object", "metadata"],
            ["request", "object", "metadata", "labels"],
            ["request", "object", "metadata", "annotations"],
            ["request", "object", "spec"],
            ["request", "object", "spec", "job"],
            ["request", "object", "spec", "flinkConfiguration"],
            ["request", "oldObject"],
            ["request", "kind"],
            ["request", "operation"],
            ["request", "dryRun"],
            ["request", "subResource"],
            ["apiVersion"],
        ]
    )
    return st.tuples(paths, json_values, st.sampled_from([*PATH_TRICKS, JOB_ID])).map(mutate)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=mutated_reviews()
    | json_values.map(
        lambda v: {
            "kind": "AdmissionReview",
            "apiVersion": "admission.k8s.io/v1",
            "request": {"uid": "x", "object": v},
        }
    )
)
def test_hostile_reviews_over_https(client: ApiServerClient, body: dict[str, Any]) -> None:
    post(client, json.dumps(body).encode())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=2000) | json_values.map(lambda v: json.dumps(v).encode()))
def test_arbitrary_bytes_over_https(client: ApiServerClient, raw: bytes) -> None:
    status, data, _ = client.request("POST", "/mutate", raw)
    assert status == 400, (status, data[:200])


@pytest.mark.parametrize("depth", [900, 990, 5_000, 100_000])
def test_deep_nesting_over_https_is_400(client: ApiServerClient, depth: int) -> None:
    """Arrays in the envelope (json.loads' own limit) and maps in flinkConfiguration (ours)."""
    status, data, _ = client.request("POST", "/mutate", b"[" * depth + b"]" * depth)
    assert status == 400, (status, data[:200])
    body = review(flink_deployment(labels={"flink-failover.io/job-id": JOB_ID}), uid="deep")
    text = json.dumps(body).replace(
        '"flinkConfiguration": {',
        '"flinkConfiguration": {"x": ' + '{"k": ' * depth + '"v"' + "}" * depth + ", ",
        1,
    )
    status, data = post(client, text.encode())
    if status == 200:
        assert json.loads(data)["response"]["allowed"] is True  # restored: the depth was manageable
    else:
        assert (status == 400 and b"nested too deeply" in data) or b"not JSON" in data, data[:200]


def test_bodies_over_the_limit_get_413_and_the_server_lives_on(fuzz_server: RunningServer) -> None:
    big = review(flink_deployment(annotations={"x": "y" * (3 * 1024 * 1024 + 10)}))
    own = fuzz_server.client(timeout=CLIENT_TIMEOUT)  # the server closes this connection after the 413
    status, _, _ = own.request("POST", "/mutate", json.dumps(big).encode())
    own.close()
    assert status == 413
    fresh = fuzz_server.client(timeout=CLIENT_TIMEOUT)
    assert fresh.request("GET", "/healthz")[0] == 200
    fresh.close()


def test_no_internal_error_was_logged(fuzz_server: RunningServer, client: ApiServerClient) -> None:
    """Runs after the fuzzing above (same module, file order): the server stayed healthy and never
    turned any of it into an internal error."""
    assert client.request("GET", "/healthz")[0] == 200
    assert "internal error handling" not in fuzz_server.logs()
    assert fuzz_server.process.poll() is None
