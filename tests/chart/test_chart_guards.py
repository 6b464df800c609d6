"""Issue 45, the member guards: no label a user may set on a Flink object takes it out of a member webhook
entry or a member ValidatingAdmissionPolicy (``app.kubernetes.io/name: flink-failover`` used to take it
out of all of them), and with fencing the webhook is registered ``failurePolicy: Fail`` (refused
otherwise by the schema, by the template and by the server, tests/test_serve_options.py). Each test
failed on the chart before the issue. The hold policy and the held entry, evaluated by CEL with that
label: tests/chart/test_cel.py ``test_a_held_job_labelled_as_the_products_own_is_still_held``."""

from __future__ import annotations

import copy
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.schema import SCHEMA_PATH
from tests.chart.test_chart import FAILOVER, JOB_ID_LABELS, find, one, render, selector_matches, template

FENCING = {"member": {"fencing": {"cluster": "member1"}}}
CUSTOM_PREFIX = "guards.example.com"
CUSTOM = {
    **FENCING,
    "policy": {"prefix": CUSTOM_PREFIX, "jobIdLabels": [f"{CUSTOM_PREFIX}/job-id", "example.com/jobid"]},
}
RENDERS: dict[str, dict[str, Any]] = {
    "member-default": {},
    "member-fencing": FENCING,
    "custom-prefix": CUSTOM,
}
FLINK = {"flink.apache.org"}
NAMESPACE_KEY = "kubernetes.io/metadata.name"  # set by kube-apiserver on every Namespace, never by a user

# Labels a user may set on a Flink object that are none of the policy's: the product's own labels first.
USER_LABELS = [
    {"app.kubernetes.io/name": "flink-failover"},
    {"app.kubernetes.io/name": "flink-failover", "app.kubernetes.io/instance": "ff"},
    {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/component": "member", "app": "orders"},
]


@pytest.fixture(scope="module")
def docs(helm: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("guards")
    return {name: render(helm, tmp, values) for name, values in RENDERS.items()}


def _policy_labels(values: dict[str, Any]) -> tuple[str, list[str]]:
    policy = values.get("policy") or {}
    return policy.get("prefix", "flink-failover.io"), policy.get("jobIdLabels", JOB_ID_LABELS)


def _is_policy_label(key: str, values: dict[str, Any]) -> bool:
    prefix, job_ids = _policy_labels(values)
    return key.startswith(f"{prefix}/") or key in job_ids


def _selector_keys(selector: dict[str, Any] | None) -> set[str]:
    selector = selector or {}
    return {e["key"] for e in selector.get("matchExpressions") or []} | set(selector.get("matchLabels") or {})


def _cel_label_keys(expression: str) -> set[str]:
    """The label keys a CEL expression reads: ``'K' in X.metadata.labels`` and ``X.metadata.labels['K']``."""
    found = re.findall(r"'([^']+)' in \w+\.metadata\.labels", expression)
    return set(found) | set(re.findall(r"metadata\.labels\['([^']+)'\]", expression))


@pytest.mark.parametrize("name", list(RENDERS))
def test_every_member_guard_selects_by_the_policys_labels_only(
    docs: dict[str, list[dict[str, Any]]], name: str
) -> None:
    """For every member webhook entry and both member policies, the object selectors and the CEL name no
    label but the policy's (its prefix's keys, its job-id labels), the namespace selectors only the
    namespace's name, and no binding narrows its policy with ``matchResources`` (kube-apiserver then
    validates every object the policy matches). So any other label on a Flink object changes nothing."""
    values, rendered = RENDERS[name], docs[name]
    hooks = one(rendered, "MutatingWebhookConfiguration")["webhooks"]
    policies = find(rendered, "ValidatingAdmissionPolicy")
    fencing = bool(values.get("member"))
    # one entry per trigger label (the failover label, each job-id label), with fencing held, fenced and
    # the first copies' (the lease keeper's)
    assert len(hooks) == 1 + len(_policy_labels(values)[1]) + (3 if fencing else 0)
    assert len(policies) == (2 if fencing else 1)  # the backstop, and with fencing the hold
    for hook in hooks:
        assert {g for rule in hook["rules"] for g in rule["apiGroups"]} == FLINK, hook["name"]
        keys = _selector_keys(hook.get("objectSelector"))
        assert keys and all(_is_policy_label(k, values) for k in keys), (hook["name"], keys)
        assert _selector_keys(hook["namespaceSelector"]) == {NAMESPACE_KEY}, hook["name"]
        for condition in hook.get("matchConditions") or []:
            read = _cel_label_keys(condition["expression"])
            assert all(_is_policy_label(k, values) for k in read), (hook["name"], read)
    for policy in policies:
        constraints = policy["spec"]["matchConstraints"]
        assert {g for rule in constraints["resourceRules"] for g in rule["apiGroups"]} == FLINK
        assert "objectSelector" not in constraints, policy["metadata"]["name"]
        assert _selector_keys(constraints["namespaceSelector"]) == {NAMESPACE_KEY}
        for condition in policy["spec"]["matchConditions"]:
            read = _cel_label_keys(condition["expression"])
            assert all(_is_policy_label(k, values) for k in read), (policy["metadata"]["name"], read)
    bindings = find(rendered, "ValidatingAdmissionPolicyBinding")
    assert sorted(b["spec"]["policyName"] for b in bindings) == sorted(
        p["metadata"]["name"] for p in policies
    )
    for binding in bindings:
        assert set(binding["spec"]) == {"policyName", "validationActions"}, binding["spec"]


def test_no_user_label_changes_which_entry_a_flink_object_is_sent_to(
    docs: dict[str, list[dict[str, Any]]],
) -> None:
    """Every combination of trigger labels (and the fenced label), with each set of labels a user may add:
    the entries whose objectSelector matches are the same with and without them, one for a triggered
    object."""
    hooks = one(docs["member-fencing"], "MutatingWebhookConfiguration")["webhooks"]
    fenced = "flink-failover.io/fenced"
    for failover, is_fenced in itertools.product((None, "true", "false"), (False, True)):
        for n in range(len(JOB_ID_LABELS) + 1):
            for subset in itertools.combinations(JOB_ID_LABELS, n):
                labels = {key: "0123456789abcdef0123456789abcdef" for key in subset}
                if failover is not None:
                    labels[FAILOVER] = failover
                if is_fenced:
                    labels[fenced] = "epoch-3"
                plain = [h["name"] for h in hooks if selector_matches(h["objectSelector"], labels)]
                if failover == "true" or subset:
                    assert plain, labels
                for user in USER_LABELS:
                    both = {**user, **labels}
                    hits = [h["name"] for h in hooks if selector_matches(h["objectSelector"], both)]
                    assert hits == plain, (both, hits, plain)


# --- failurePolicy: Ignore with fencing -------------------------------------------------------------------

IGNORE = {"member": {"webhook": {"failurePolicy": "Ignore"}}}
IGNORE_FENCED = {"member": {"webhook": {"failurePolicy": "Ignore"}, "fencing": {"cluster": "member1"}}}


def _merged(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        return {k: _merged(base.get(k), override[k]) if k in override else v for k, v in base.items()} | {
            k: v for k, v in override.items() if k not in base
        }
    return copy.deepcopy(override)


def _schema_errors(values: dict[str, Any]) -> list[str]:
    """The chart's values.schema.json on values.yaml with ``values`` over it, as helm merges them."""
    import json

    import jsonschema

    defaults = yaml.safe_load((SCHEMA_PATH.parent / "values.yaml").read_text(encoding="utf-8"))
    merged = _merged(defaults, {**values, "image": {"repository": "registry.example.com/ff"}})
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return [
        "/".join(str(p) for p in e.absolute_path)
        for e in jsonschema.Draft7Validator(schema).iter_errors(merged)
    ]


def test_the_schema_refuses_ignore_with_fencing_only() -> None:
    assert _schema_errors(IGNORE_FENCED) == ["member/webhook/failurePolicy"]
    assert _schema_errors(IGNORE) == []
    assert _schema_errors({**IGNORE_FENCED, "policy": {"fencing": {"enabled": False}}}) == []
    assert _schema_errors({**IGNORE_FENCED, "role": "control-plane"}) == []  # no member webhook rendered
    assert _schema_errors(FENCING) == []


def _env(rendered: list[dict[str, Any]]) -> dict[str, str]:
    (container,) = one(rendered, "Deployment")["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_helm_refuses_ignore_with_fencing_by_the_schema_and_by_the_template(
    helm: str, tmp_path: Path
) -> None:
    result = template(helm, tmp_path, IGNORE_FENCED)
    assert result.returncode != 0
    assert "/member/webhook/failurePolicy" in result.stderr and "'Fail'" in result.stderr, result.stderr
    skipped = template(helm, tmp_path, IGNORE_FENCED, "--skip-schema-validation")
    assert skipped.returncode != 0
    assert (
        "member.webhook.failurePolicy Ignore is refused with fencing on (member.fencing.cluster member1, "
        "policy.fencing.enabled)" in skipped.stderr
    ), skipped.stderr
    assert "set member.webhook.failurePolicy: Fail" in skipped.stderr
    # the control plane renders no member webhook: the member's values are not its concern
    control_plane = render(helm, tmp_path, {**IGNORE_FENCED, "role": "control-plane"})
    assert "FLINK_FAILOVER_WEBHOOK_FAILURE_POLICY" not in _env(control_plane)


@pytest.mark.parametrize(
    ("values", "policy", "fenced"),
    [
        ({}, "Fail", False),
        (FENCING, "Fail", True),
        (IGNORE, "Ignore", False),  # without fencing Ignore stays the user's choice
        ({**IGNORE_FENCED, "policy": {"fencing": {"enabled": False}}}, "Ignore", False),
    ],
    ids=["default", "fencing", "ignore", "ignore-fencing-off"],
)
def test_the_server_is_told_its_registrations_failure_policy(
    helm: str, tmp_path: Path, values: dict[str, Any], policy: str, fenced: bool
) -> None:
    """The member Deployment sets $FLINK_FAILOVER_WEBHOOK_FAILURE_POLICY from member.webhook.failurePolicy:
    the server refuses to start with fencing under Ignore even where the chart's checks were skipped."""
    rendered = render(helm, tmp_path, values)
    assert {h["failurePolicy"] for h in one(rendered, "MutatingWebhookConfiguration")["webhooks"]} == {policy}
    assert _env(rendered)["FLINK_FAILOVER_WEBHOOK_FAILURE_POLICY"] == policy
    args = one(rendered, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ("--cluster=member1" in args) == fenced
