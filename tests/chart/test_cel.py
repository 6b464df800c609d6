"""The chart's CEL, evaluated: the ValidatingAdmissionPolicy backstop and the Work webhook's matchConditions.

kube-apiserver evaluates these expressions; here cel-python (a CEL implementation) runs the rendered
text against realistic objects, including Works and member objects recorded from a real Karmada
failover, so a wrong field name, a missing has() guard or an inverted condition fails a test.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import celpy
import pytest

from tests.chart.test_chart import CP, one, render

JOB_ID = "fc7fce4860f65c315b1dfa67267da151"


class CelError(Exception):
    pass


def evaluate(expression: str, activation: dict[str, Any]) -> bool:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    try:
        result = program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()})
    except celpy.CELEvalError as exc:  # e.g. a field read without a has() guard
        raise CelError(f"{expression!r}: {exc}") from None
    if isinstance(result, celpy.CELEvalError):
        raise CelError(f"{expression!r}: {result}")
    return bool(result)


def admit(policy: dict[str, Any], obj: dict[str, Any]) -> str:
    """'skipped' (a matchCondition is false), 'allowed' or 'denied', as kube-apiserver would decide."""
    spec = policy["spec"]
    activation = {"object": obj, "request": {"namespace": obj["metadata"].get("namespace", "")}}
    if not all(evaluate(c["expression"], activation) for c in spec["matchConditions"]):
        return "skipped"
    if all(evaluate(v["expression"], activation) for v in spec["validations"]):
        return "allowed"
    return "denied"


def flink(
    labels: dict[str, str] | None = None,
    job: dict[str, Any] | None = None,
    kind: str = "FlinkDeployment",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "orders", "namespace": "analytics"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"flinkVersion": "v1_19", "serviceAccount": "flink"}
    if job is not None:
        spec["job"] = job
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": kind, "metadata": meta, "spec": spec}


def deleting(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    obj["metadata"]["finalizers"] = ["flinkdeployments.flink.apache.org/finalizer"]
    return obj


RUNNING = {"jarURI": "local:///opt/flink/job.jar", "upgradeMode": "last-state", "state": "running"}
RESTORED = {**RUNNING, "initialSavepointPath": f"s3://flink/chk/{JOB_ID}/chk-42"}


@pytest.fixture(scope="module")
def backstop(helm: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return one(render(helm, tmp_path_factory.mktemp("cel")), "ValidatingAdmissionPolicy")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (flink({"flink-failover.io/failover": "true"}, RUNNING), "denied"),
        (flink({"flink-failover.io/failover": "true"}, RESTORED), "allowed"),
        (flink({"flink-failover.io/failover": "true"}, {**RUNNING, "state": "suspended"}), "allowed"),
        (flink({"flink-failover.io/failover": "true"}, {**RUNNING, "initialSavepointPath": ""}), "denied"),
        (
            flink({"flink-failover.io/failover": "true"}, {"jarURI": "local:///x.jar"}),
            "denied",
        ),  # no state field
        (flink({"flink-failover.io/failover": "false"}, RUNNING), "skipped"),
        (flink({"flink-failover.io/job-id": JOB_ID}, RUNNING), "denied"),
        (flink({"application.karmada.io/failover-jobid": JOB_ID}, RUNNING), "denied"),
        (flink({"application.karmada.io/cluster-failover-jobid": JOB_ID}, RESTORED), "allowed"),
        (flink({"resourcebinding.karmada.io/failover-jobid": JOB_ID}, RUNNING), "denied"),
        (flink({"app": "orders"}, RUNNING), "skipped"),
        (flink(None, RUNNING), "skipped"),  # no labels at all: has() guard
        (flink({"flink-failover.io/failover": "true"}, None), "skipped"),  # session cluster: no spec.job
        (deleting(flink({"flink-failover.io/failover": "true"}, RUNNING)), "skipped"),
        (flink({"flink-failover.io/failover": "true"}, RUNNING, kind="FlinkSessionJob"), "denied"),
        (flink({"flink-failover.io/failover": "true"}, RESTORED, kind="FlinkSessionJob"), "allowed"),
    ],
)
def test_backstop_decisions(backstop: dict[str, Any], obj: dict[str, Any], expected: str) -> None:
    assert admit(backstop, obj) == expected


def test_backstop_message_names_the_object(backstop: dict[str, Any]) -> None:
    env = celpy.Environment()
    (validation,) = backstop["spec"]["validations"]
    prog = env.program(env.compile(validation["messageExpression"]))
    message = prog.evaluate(
        {"object": celpy.json_to_cel(flink({"flink-failover.io/failover": "true"}, RUNNING))}
    )
    assert "orders" in str(message) and "initialSavepointPath" in str(message)


def test_backstop_lets_a_policy_decided_empty_start_through(helm: str, tmp_path: Path) -> None:
    policy = one(render(helm, tmp_path, {"policy": {"onMissingState": "allow"}}), "ValidatingAdmissionPolicy")
    labels = {"flink-failover.io/failover": "true"}
    assert admit(policy, flink(labels, RUNNING)) == "denied"
    assert admit(policy, flink(labels, RUNNING, annotations={"other": "x"})) == "denied"
    stateless = {"flink-failover.io/restore-decision": "stateless"}
    assert admit(policy, flink(labels, RUNNING, annotations=stateless)) == "allowed"


def test_backstop_on_recorded_karmada_member_object(backstop: dict[str, Any], shared_data: Path) -> None:
    """Karmada injected only its jobId label (scenario A3): without our webhook the job would start empty."""
    obj = json.loads(
        (shared_data / "karmada-observed/scenA3-taint/obj-member2-after-failover.json").read_text()
    )
    assert "initialSavepointPath" not in obj["spec"]["job"]
    assert admit(backstop, obj) == "denied"
    restored = copy.deepcopy(obj)
    restored["spec"]["job"]["initialSavepointPath"] = f"s3://flink/chk/{JOB_ID}/chk-7"
    assert admit(backstop, restored) == "allowed"


# --- the control-plane Work webhook's matchConditions ---------------------------------------------------


@pytest.fixture(scope="module")
def work_conditions(helm: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    mwc = one(render(helm, tmp_path_factory.mktemp("cel"), CP), "MutatingWebhookConfiguration")
    (webhook,) = mwc["webhooks"]
    return list(webhook["matchConditions"])


def sent(conditions: list[dict[str, Any]], work: dict[str, Any]) -> bool:
    activation = {"object": work, "request": {"namespace": work["metadata"]["namespace"]}}
    return all(evaluate(c["expression"], activation) for c in conditions)


def test_work_webhook_is_called_for_flink_works_only(
    work_conditions: list[dict[str, Any]], shared_data: Path
) -> None:
    recorded = shared_data / "karmada-observed"
    works = [w for f in sorted(recorded.glob("*/works-*.json")) for w in json.loads(f.read_text())["items"]]
    assert works
    decisions = {}
    for work in works:
        kinds = {(m.get("apiVersion"), m.get("kind")) for m in work["spec"]["workload"]["manifests"]}
        decisions[work["metadata"]["name"]] = sent(work_conditions, work)
        assert decisions[work["metadata"]["name"]] == any(a.startswith("flink.apache.org/") for a, _ in kinds)
    assert any(decisions.values()) and not all(decisions.values())
    flink_work = next(w for w in works if sent(work_conditions, w))
    elsewhere = copy.deepcopy(flink_work)
    elsewhere["metadata"]["namespace"] = "analytics"  # not an execution namespace
    assert not sent(work_conditions, elsewhere)


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"workload": {}},
        {"workload": {"manifests": []}},
        {"workload": {"manifests": [{"kind": "ConfigMap"}]}},
        {"workload": {"manifests": [{"apiVersion": {"group": "flink.apache.org"}, "kind": "Odd"}]}},
    ],
)
def test_work_conditions_survive_missing_fields(
    work_conditions: list[dict[str, Any]], spec: dict[str, Any]
) -> None:
    work = {
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "w", "namespace": "karmada-es-member1"},
        "spec": spec,
    }
    assert sent(work_conditions, work) is False


def test_member_webhook_skips_objects_being_deleted(helm: str, tmp_path: Path) -> None:
    mwc = one(render(helm, tmp_path), "MutatingWebhookConfiguration")
    labelled = flink({"flink-failover.io/failover": "true"}, RUNNING)
    for webhook in mwc["webhooks"]:
        conditions = webhook["matchConditions"]
        assert all(evaluate(c["expression"], {"object": labelled}) for c in conditions)
        assert not all(
            evaluate(c["expression"], {"object": deleting(copy.deepcopy(labelled))}) for c in conditions
        )
