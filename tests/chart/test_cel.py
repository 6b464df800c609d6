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

from tests.chart.test_chart import CP, FULLNAME, NS, find, one, render, selector_matches

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


def selected(policy: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """The policy's ``matchConstraints.objectSelector`` (none: every object): kube-apiserver matches it
    against the new object and the old one, either suffices (k8s.io/apiserver pkg/admission/plugin/policy/
    matching uses the webhooks' object matcher). Its bindings carry no ``matchResources``
    (tests/chart/test_chart_guards.py)."""
    selector = policy["spec"]["matchConstraints"].get("objectSelector") or {}
    versions = [o for o in (old, new) if o is not None]
    return any(selector_matches(selector, o["metadata"].get("labels") or {}) for o in versions)


def admit(policy: dict[str, Any], obj: dict[str, Any]) -> str:
    """'skipped' (not selected, or a matchCondition is false), 'allowed' or 'denied', as kube-apiserver
    would decide."""
    spec = policy["spec"]
    activation = {"object": obj, "request": {"namespace": obj["metadata"].get("namespace", "")}}
    if not selected(policy, None, obj):
        return "skipped"
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
        # issue 45: the label the product's own objects carry takes a Flink object out of nothing
        (
            flink(
                {"flink-failover.io/failover": "true", "app.kubernetes.io/name": "flink-failover"}, RUNNING
            ),
            "denied",
        ),
        (
            flink({"flink-failover.io/job-id": JOB_ID, "app.kubernetes.io/name": "flink-failover"}, RUNNING),
            "denied",
        ),
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


def test_backstop_lets_a_job_that_declares_no_state_start_as_declared(helm: str, tmp_path: Path) -> None:
    """Issue 45: the webhook starts a job with upgradeMode stateless and no directory anywhere (decision
    stateless): it has no state to lose. One that names a directory, flat or nested, is still refused."""
    policy = one(render(helm, tmp_path), "ValidatingAdmissionPolicy")
    labels, stateless = (
        {"flink-failover.io/failover": "true"},
        {"flink-failover.io/restore-decision": "stateless"},
    )
    job = {"jarURI": "local:///x.jar", "upgradeMode": "stateless", "state": "running"}
    assert admit(policy, flink(labels, job, annotations=stateless)) == "allowed"
    unset = {k: v for k, v in job.items() if k != "upgradeMode"}  # the operator's default: stateless
    assert admit(policy, flink(labels, unset, annotations=stateless)) == "allowed"
    assert admit(policy, flink(labels, job)) == "denied"  # not the webhook's decision
    assert (
        admit(policy, flink(labels, {**job, "upgradeMode": "savepoint"}, annotations=stateless)) == "denied"
    )
    for conf in (
        {"execution.checkpointing.dir": "s3://b/c"},
        {"state.savepoints.dir": "s3://b/s"},
        {"execution": {"checkpointing": {"dir": "s3://b/c"}}},
        {"state": {"checkpoints": {"dir": "s3://b/c"}}},
        {"execution": {"checkpointing": {"savepoint-dir": "s3://b/s"}}},
        {"state": {"backend": {"fs": {"checkpointdir": "s3://b/c"}}}},
    ):
        obj = flink(labels, job, annotations=stateless)
        obj["spec"]["flinkConfiguration"] = conf
        assert admit(policy, obj) == "denied", conf
    plain = flink(labels, job, annotations=stateless)
    plain["spec"]["flinkConfiguration"] = {"execution": {"checkpointing": {"interval": "10s"}}, "a.b": "c"}
    assert admit(policy, plain) == "allowed"
    # with a policy directory every job keeps state somewhere: no such start
    with_dir = one(
        render(helm, tmp_path, {"policy": {"defaultCheckpointDir": "s3://b/c"}}),
        "ValidatingAdmissionPolicy",
    )
    assert admit(with_dir, flink(labels, job, annotations=stateless)) == "denied"


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


# --- a job held for fencing: the hold backstop and the webhook's registration (issue 35) ---------------

P = "flink-failover.io"
FENCING = {"member": {"fencing": {"cluster": "member1"}}}
TRIGGER = {f"{P}/failover": "true", f"{P}/job-id": JOB_ID}


@pytest.fixture(scope="module")
def fencing_docs(helm: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return render(helm, tmp_path_factory.mktemp("cel-hold"), FENCING)


@pytest.fixture(scope="module")
def agent(fencing_docs: list[dict[str, Any]]) -> str:
    """The user the agent patches as: the pods' ServiceAccount (the webhook learns it the same way)."""
    pod = one(fencing_docs, "Deployment")["spec"]["template"]["spec"]
    return f"system:serviceaccount:{NS}:{pod['serviceAccountName']}"


def held_object() -> dict[str, Any]:
    """A restore the member webhook admitted held at epoch 3, as stored."""
    return flink(
        {**TRIGGER, "app": "orders"},
        {**RESTORED, "state": "suspended"},
        annotations={
            f"{P}/restore-decision": "held",
            f"{P}/epoch": "3",
            f"{P}/hold": "epoch 3: waiting for member1 to stop; ...",
        },
    )


def _edited(
    old: dict[str, Any],
    state: str = "running",
    drop_labels: tuple[str, ...] = (),
    drop: tuple[str, ...] = (),
    **annotations: str,
) -> dict[str, Any]:
    new = copy.deepcopy(old)
    new["spec"]["job"]["state"] = state
    for key in drop_labels:
        new["metadata"]["labels"].pop(key)
    for key in drop:
        new["metadata"]["annotations"].pop(f"{P}/{key}")
    new["metadata"].setdefault("annotations", {}).update(
        {f"{P}/{k.replace('_', '-')}": v for k, v in annotations.items()}
    )
    return new


def _gitops(_old: dict[str, Any]) -> dict[str, Any]:
    return flink({"app": "orders"}, RUNNING)  # the base manifest: none of our labels or fields


HOLD_EDITS: dict[str, Any] = {
    "start": lambda old: _edited(old),
    "drop-trigger-labels-and-start": lambda old: _edited(old, drop_labels=tuple(TRIGGER)),
    "remove-hold": lambda old: _edited(old, "suspended", drop=("hold",)),
    "change-restore-decision": lambda old: _edited(old, "suspended", restore_decision="restored"),
    "lower-epoch": lambda old: _edited(old, "suspended", epoch="1"),
    "remove-epoch": lambda old: _edited(old, "suspended", drop=("epoch",)),
    "forge-release": lambda old: _edited(old, drop=("hold",), released="ack at 2026-12-05T00:00:00Z"),
    "gitops-full-replace": _gitops,
}


def admit_update(policy: dict[str, Any], old: dict[str, Any], new: dict[str, Any], user: str) -> str:
    """kube-apiserver's answer to an UPDATE: 'skipped' (a matchCondition is false), 'allowed' or 'denied'."""
    spec = policy["spec"]
    activation = {
        "object": new,
        "oldObject": old,
        "request": {"namespace": new["metadata"]["namespace"], "userInfo": {"username": user}},
    }
    if not selected(policy, old, new):
        return "skipped"
    if not all(evaluate(c["expression"], activation) for c in spec["matchConditions"]):
        return "skipped"
    if all(evaluate(v["expression"], activation) for v in spec["validations"]):
        return "allowed"
    return "denied"


@pytest.mark.parametrize("edit", sorted(HOLD_EDITS))
def test_hold_backstop_refuses_every_edit_but_the_agents(
    fencing_docs: list[dict[str, Any]], agent: str, edit: str
) -> None:
    hold = one(fencing_docs, "ValidatingAdmissionPolicy", f"{FULLNAME}-{NS}-hold")
    old = held_object()
    new = HOLD_EDITS[edit](old)
    assert admit_update(hold, old, new, "alice") == "denied"
    assert admit_update(hold, old, new, "system:serviceaccount:karmada-system:karmada-agent") == "denied"
    assert admit_update(hold, old, new, agent) == "skipped"  # the agent's release, its hold rewrites


def test_hold_backstop_lets_what_keeps_the_hold_through(
    fencing_docs: list[dict[str, Any]], agent: str
) -> None:
    hold = one(fencing_docs, "ValidatingAdmissionPolicy", f"{FULLNAME}-{NS}-hold")
    old = held_object()
    # an engineer asks for the release (the agent carries it out); Karmada's re-apply as the webhook left it
    assert admit_update(hold, old, _edited(old, "suspended", release="true"), "alice") == "allowed"
    assert admit_update(hold, old, copy.deepcopy(old), "alice") == "allowed"
    # not held: a running copy, a suspended one without a hold, one being deleted
    running = _edited(old, drop=("hold",))
    assert admit_update(hold, running, _edited(running, "suspended"), "alice") == "skipped"
    assert admit_update(hold, deleting(copy.deepcopy(old)), deleting(_edited(old)), "alice") == "skipped"
    binding = one(fencing_docs, "ValidatingAdmissionPolicyBinding", f"{FULLNAME}-{NS}-hold")
    assert binding["spec"] == {"policyName": hold["metadata"]["name"], "validationActions": ["Deny"]}
    # no label selects it (issue 45: app.kubernetes.io/name used to take an object out), never the
    # trigger labels either: an edit that drops them is judged too
    assert "objectSelector" not in hold["spec"]["matchConstraints"]


OWN = {"app.kubernetes.io/name": "flink-failover", "app.kubernetes.io/instance": "ff"}


@pytest.mark.parametrize("triggers", [True, False], ids=["with-trigger-labels", "bare"])
def test_a_held_job_labelled_as_the_products_own_is_still_held(
    fencing_docs: list[dict[str, Any]], triggers: bool
) -> None:
    """Issue 45: a held FlinkDeployment labelled ``app.kubernetes.io/name: flink-failover`` (before and
    after the edit: kube-apiserver selects by either) and set running is refused by the hold policy and
    sent to the webhook; before, that label took it out of both."""
    hold = one(fencing_docs, "ValidatingAdmissionPolicy", f"{FULLNAME}-{NS}-hold")
    mwc = one(fencing_docs, "MutatingWebhookConfiguration")
    old = held_object()
    if not triggers:  # a held object whose trigger labels are gone on both sides
        old["metadata"]["labels"] = {"app": "orders"}
    old["metadata"]["labels"].update(OWN)
    new = _edited(old)
    assert new["spec"]["job"]["state"] == "running" and new["metadata"]["labels"].items() >= OWN.items()
    assert admit_update(hold, old, new, "alice") == "denied"
    entry = "flink-failover-io-failover" if triggers else "flink-failover-io-held"
    assert webhooks_called(mwc, old, new) == [f"{entry}.flink-failover.io"]


def test_hold_backstop_is_rendered_with_fencing_only(helm: str, tmp_path: Path) -> None:
    assert not find(render(helm, tmp_path), "ValidatingAdmissionPolicy", f"{FULLNAME}-{NS}-hold")


def webhooks_called(mwc: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """The entries kube-apiserver calls for a request: an objectSelector matches when the old object or
    the new one matches it (k8s.io/apiserver pkg/admission/plugin/webhook/predicates/object), then every
    matchCondition must hold."""
    activation = {"object": new, "oldObject": old, "request": {"namespace": new["metadata"]["namespace"]}}
    called = []
    resource = new["kind"].lower() + "s"  # flinkdeployments, flinksessionjobs, flinkbluegreendeployments
    for hook in mwc["webhooks"]:
        operation = "UPDATE" if old is not None else "CREATE"
        if not any(
            operation in rule["operations"] and resource in rule["resources"] for rule in hook["rules"]
        ):
            continue
        versions = [o for o in (old, new) if o is not None]
        if not any(
            selector_matches(hook["objectSelector"], o["metadata"].get("labels") or {}) for o in versions
        ):
            continue
        if all(evaluate(c["expression"], activation) for c in hook.get("matchConditions", [])):
            called.append(hook["name"])
    return called


def blue_green_child(state: str) -> dict[str, Any]:
    child = flink({"DeploymentType": "BLUE"}, {**RESTORED, "state": state})
    child["metadata"]["name"] = "orders-blue"
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkBlueGreenDeployment", "name": "orders"}
    ]
    return child


def test_every_update_of_a_held_object_reaches_the_webhook_once(fencing_docs: list[dict[str, Any]]) -> None:
    mwc = one(fencing_docs, "MutatingWebhookConfiguration")
    old = held_object()
    trigger_entry = "flink-failover-io-failover.flink-failover.io"
    held_entry = "flink-failover-io-held.flink-failover.io"
    for edit in sorted(HOLD_EDITS):
        # the old object's labels still select it, whatever the request removed
        assert webhooks_called(mwc, old, HOLD_EDITS[edit](old)) == [trigger_entry], edit
    # a held object whose labels are gone on both sides (an edit the webhook did not see): by its hold
    bare = copy.deepcopy(old)
    bare["metadata"]["labels"] = {"app": "orders"}
    assert webhooks_called(mwc, bare, _edited(bare)) == [held_entry]
    # a blue/green child's start (none of its parent's labels): sent, the webhook asks the parent
    assert webhooks_called(mwc, blue_green_child("suspended"), blue_green_child("running")) == [held_entry]
    # what is neither: not sent
    assert webhooks_called(mwc, blue_green_child("running"), blue_green_child("running")) == []
    assert webhooks_called(mwc, blue_green_child("suspended"), blue_green_child("suspended")) == []
    # a suspended child whose owner is removed or changed (issue 45): sent by the owner it had, started or not
    orphan = blue_green_child("running")
    del orphan["metadata"]["ownerReferences"]
    assert webhooks_called(mwc, blue_green_child("suspended"), orphan) == [held_entry]
    moved = blue_green_child("suspended")
    moved["metadata"]["ownerReferences"][0]["name"] = "elsewhere"
    assert webhooks_called(mwc, blue_green_child("suspended"), moved) == [held_entry]
    plain = flink({"app": "orders"}, {**RUNNING, "state": "suspended"})
    assert webhooks_called(mwc, plain, _edited(plain)) == []
    assert webhooks_called(mwc, None, flink(TRIGGER, RUNNING)) == [trigger_entry]


# --- a job's first copy: the lease keeper's own entry (issue 47) -----------------------------------------

FIRST = "flink-failover-io-first-copy.flink-failover.io"
CHECKPOINTS = {"state.checkpoints.dir": "s3://flink/chk"}


def first_copy(kind: str = "FlinkDeployment", labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A job as its user (or Karmada, on its first cluster) writes it: none of our labels, its state set."""
    obj = flink({"app": "orders", **(labels or {})}, dict(RUNNING))
    obj["spec"]["flinkConfiguration"] = dict(CHECKPOINTS)
    if kind == "FlinkBlueGreenDeployment":
        obj = {**obj, "kind": kind, "spec": {"template": {"spec": obj["spec"]}}}
    return obj


def test_every_write_of_a_jobs_first_copy_reaches_the_webhook_once(
    fencing_docs: list[dict[str, Any]],
) -> None:
    """The first-copy entry takes what runs a job (or is a session cluster) with a checkpoint directory
    and none of the other entries takes (trigger labels, held, fenced, a blue/green child), at CREATE
    and UPDATE; each admission goes through one entry."""
    mwc = one(fencing_docs, "MutatingWebhookConfiguration")
    (entry,) = [h for h in mwc["webhooks"] if h["name"] == FIRST]
    assert entry["failurePolicy"] == "Fail" and entry["sideEffects"] == "NoneOnDryRun"
    assert entry["rules"][0]["resources"] == ["flinkdeployments", "flinkbluegreendeployments"]
    for kind in ("FlinkDeployment", "FlinkBlueGreenDeployment"):
        obj = first_copy(kind)
        assert webhooks_called(mwc, None, obj) == [FIRST], kind
        assert webhooks_called(mwc, obj, copy.deepcopy(obj)) == [FIRST], kind  # Karmada's re-apply
    obj = first_copy()
    nested = copy.deepcopy(obj)  # the operator's nested configuration
    nested["spec"]["flinkConfiguration"] = {"execution": {"checkpointing": {"dir": "s3://flink/chk"}}}
    assert webhooks_called(mwc, None, nested) == [FIRST]
    # a session cluster gets the keeper of its session jobs; a job without a checkpoint directory has
    # no lease; a session job runs in its session cluster's JobManager
    session = copy.deepcopy(obj)
    del session["spec"]["job"]
    assert webhooks_called(mwc, None, session) == [FIRST]
    assert webhooks_called(mwc, session, copy.deepcopy(session)) == [FIRST]
    stateless = copy.deepcopy(obj)
    del stateless["spec"]["flinkConfiguration"]
    stateless_session = copy.deepcopy(session)
    del stateless_session["spec"]["flinkConfiguration"]
    session_job = {**copy.deepcopy(obj), "kind": "FlinkSessionJob"}
    for other in (stateless, stateless_session, session_job):
        assert webhooks_called(mwc, None, other) == []
    # a failover (the webhook's own reading: true in any case) and an edit that drops its labels: not here
    for value in ("true", "True"):
        assert FIRST not in webhooks_called(mwc, None, first_copy(labels={f"{P}/failover": value}))
    labelled = first_copy(labels=TRIGGER)
    assert webhooks_called(mwc, labelled, first_copy()) == ["flink-failover-io-failover.flink-failover.io"]
    assert webhooks_called(mwc, None, first_copy(labels={f"{P}/failover": "false"})) == [FIRST]
    # a held copy, a stale copy the agent stopped, a blue/green child: their own entries or none
    held = held_object()
    held["metadata"]["labels"] = {"app": "orders"}
    held["spec"]["flinkConfiguration"] = dict(CHECKPOINTS)
    assert webhooks_called(mwc, held, _edited(held)) == ["flink-failover-io-held.flink-failover.io"]
    fenced = first_copy(labels={f"{P}/fenced": "4"})
    assert webhooks_called(mwc, fenced, first_copy()) == ["flink-failover-io-fenced.flink-failover.io"]
    child = blue_green_child("running")
    child["spec"]["flinkConfiguration"] = dict(CHECKPOINTS)
    assert webhooks_called(mwc, child, copy.deepcopy(child)) == []
    assert webhooks_called(mwc, obj, deleting(copy.deepcopy(obj))) == []


def test_the_first_copy_entry_is_rendered_where_the_keeper_can_be_added(helm: str, tmp_path: Path) -> None:
    """Not without fencing, nor where the policy turns the keeper off everywhere or native sidecars are
    declared off (it would send every job's writes to a webhook that adds nothing); with the policy's
    defaultCheckpointDir every job has a directory."""

    def entry(values: dict[str, Any]) -> dict[str, Any] | None:
        mwc = one(render(helm, tmp_path, values), "MutatingWebhookConfiguration")
        return next((h for h in mwc["webhooks"] if h["name"] == FIRST), None)

    assert entry({}) is None
    assert entry({**FENCING, "policy": {"fencing": {"keeper": {"enabled": False}}}}) is None
    assert entry({"member": {"fencing": {"cluster": "member1"}, "keeper": {"nativeSidecars": "off"}}}) is None
    defaulted = entry({**FENCING, "policy": {"defaultCheckpointDir": "s3://flink/chk"}})
    assert defaulted is not None
    assert "declares-a-checkpoint-directory" not in [c["name"] for c in defaulted["matchConditions"]]
