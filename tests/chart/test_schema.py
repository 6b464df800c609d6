"""The restore policy, declared once (``webhook/policy/restore.py`` ``POLICY``): one table of policies run
through the server's validator, the JSON schema made from the declaration and ``helm template`` with the
chart's generated schema and rule checks; all three decide alike (a typo fails ``helm install`` instead of
crash-looping the pods), and a rule between fields fails helm with the server's own words. The generated
files (values.schema.json, the template checks, the docs tables) are what the declaration makes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.schema import SCHEMA_PATH, generated
from tests.chart.schema import render as render_schema
from tests.chart.test_chart import one, template
from webhook.policy.load import DEFAULT_POLICY_FILE, load_policy
from webhook.policy.restore import RestorePolicy, json_schema, policy_from_dict
from webhook.policy.schema import PolicyError


def test_committed_schema_is_the_generated_one() -> None:
    committed = SCHEMA_PATH.read_text(encoding="utf-8")
    assert json.loads(committed) == json.loads(render_schema()), "run: make chart-schema"
    assert committed == render_schema()


@pytest.mark.parametrize("path", list(generated()), ids=lambda p: p.name)
def test_every_generated_file_is_what_the_declaration_makes(path: Path) -> None:
    """values.schema.json, the storage options and rule checks of the chart, the docs' policy tables."""
    assert path.read_text(encoding="utf-8") == generated()[path], f"{path}: run make chart-schema"


def test_the_shipped_defaults_are_the_declared_ones() -> None:
    """The package's restore-policy.yaml and the chart's values.yaml policy block say the defaults."""
    values = yaml.safe_load((SCHEMA_PATH.parent / "values.yaml").read_text(encoding="utf-8"))
    assert policy_from_dict(values["policy"]) == RestorePolicy() == load_policy(DEFAULT_POLICY_FILE)


@dataclass(frozen=True)
class Case:
    """A policy, the fields the server names refusing it (none: accepted), and where the chart decides
    otherwise, why (only a rule of the chart's own: the webhook's timeout)."""

    policy: dict[str, Any]
    refused: tuple[str, ...] = ()
    chart_refuses: str = ""  # why the chart refuses what the server accepts

    @property
    def id(self) -> str:
        return json.dumps(self.policy)


FENCING_AT_LIMIT = {  # renewDeadlineSeconds = 2 x pollSeconds, and deadline + poll + margin + poll = lease
    "leaseSeconds": 40,
    "pollSeconds": 8,
    "renewDeadlineSeconds": 16,
    "stopMarginSeconds": 8,
}
CASES = [
    # every documented value (README "Restore policy", values.yaml)
    Case({"defaultCheckpointDir": "s3://bucket/checkpoints"}),
    Case(
        {"defaultCheckpointDir": "s3p://bucket/checkpoints", "defaultSavepointDir": "s3a://bucket/savepoints"}
    ),
    Case({"defaultCheckpointDir": "gs://bucket/chk"}),
    Case(
        {
            "allowedSchemes": ["hdfs"],
            "defaultCheckpointDir": "hdfs://namenode:8020/flink/chk",
            "fencing": {"enabled": False},
        }
    ),
    Case({"defaultCheckpointDir": "abfss://container@account.dfs.core.windows.net/chk"}),
    Case(
        {"allowedSchemes": ["oss"], "defaultCheckpointDir": "oss://bucket/chk", "fencing": {"enabled": False}}
    ),
    Case({"defaultCheckpointDir": "file:///data/chk"}),
    Case({"defaultCheckpointDir": "/data/chk"}),
    Case({"defaultCheckpointDir": " s3://bucket/chk "}),  # blanks around it (issue 31: the chart refused)
    Case({"defaultCheckpointDir": "S3://bucket/chk"}),  # the scheme in capitals (issue 31: the chart refused)
    Case({"allowedSchemes": ["s3"], "defaultCheckpointDir": "s3://b/c"}),
    Case({"allowedSchemes": ["wasbs", "file"]}),
    Case({"prefer": "checkpoint"}),
    Case({"prefer": "savepoint"}),
    Case({"onMissingState": "deny"}),
    Case({"onMissingState": "allow"}),
    Case({"onStorageError": "suspend"}),
    Case({"upgradeMode": "keep"}),
    Case({"upgradeMode": "savepoint"}),
    Case({"upgradeMode": "last-state"}),
    Case({"state": "running"}),
    Case({"verify": "header"}),
    Case({"onNewerMetadata": "skip"}),
    Case({"onUnloadable": "older"}),
    Case({"flinkDefaults": {"execution.state-recovery.claim-mode": "CLAIM"}}),
    Case({"flinkDefaults": {"execution": {"savepoint-restore-mode": "CLAIM"}}}),
    Case({"verifyBudget": 1}),
    Case({"deadlineSeconds": 0.5}),
    Case({"deadlineSeconds": 12}),
    Case({"storageOptions": {"s3": {"endpoint_url": "http://minio:9000"}}}),
    Case({"jobIdLabels": ["example.com/old-job"]}),
    Case({"prefix": "failover.example.com"}),
    Case({"operatorVersion": "1.10"}),
    Case({"operatorVersion": "1.7"}),
    Case({"operatorVersion": "v2.0.1"}),
    Case(
        {
            "fencing": {
                "leaseSeconds": 70,
                "pollSeconds": 10,
                "renewDeadlineSeconds": 30,
                "stopMarginSeconds": 20,
            }
        }
    ),
    Case({"fencing": {"leaseSeconds": 300, "pollSeconds": 0.5, "onRenewFailure": "keep-running"}}),
    # the rules at their limits: both bounds are inclusive
    Case({"fencing": {"leaseSeconds": 30, "pollSeconds": 5, "renewDeadlineSeconds": 10}}),
    Case({"fencing": FENCING_AT_LIMIT}),
    # in decimal, as sprig adds: 0.2 + 0.1 + 0.1 + 0.1 fits in 0.5 (issue 31: floats refused such sums)
    Case(
        {
            "fencing": {
                "leaseSeconds": 0.5,
                "pollSeconds": 0.1,
                "renewDeadlineSeconds": 0.2,
                "stopMarginSeconds": 0.1,
            }
        }
    ),
    # the near misses a user types, one field each
    Case({"defaultCheckpointDir": "notauri"}, ("defaultCheckpointDir",)),
    Case({"defaultCheckpointDir": "s3:/bucket/chk"}, ("defaultCheckpointDir",)),
    Case({"defaultCheckpointDir": "s3:///chk"}, ("defaultCheckpointDir",)),
    Case({"defaultCheckpointDir": "ftp://host/chk"}, ("defaultCheckpointDir",)),
    Case({"defaultCheckpointDir": "s3://bucket/chk/../other"}, ("defaultCheckpointDir",)),
    Case({"defaultCheckpointDir": "file://host/chk"}, ("defaultCheckpointDir",)),
    Case({"defaultSavepointDir": "bucket/savepoints"}, ("defaultSavepointDir",)),
    Case({"allowedSchemes": ["s4"]}, ("allowedSchemes",)),
    Case({"allowedSchemes": []}, ("allowedSchemes",)),  # nothing could ever be restored
    Case({"allowedSchemes": ["s3", "s3"]}, ("allowedSchemes",)),
    Case({"prefer": "latest"}, ("prefer",)),
    Case({"onMissingState": "ignore"}, ("onMissingState",)),
    Case({"upgradeMode": "stateless"}, ("upgradeMode",)),
    Case({"state": "suspended"}, ("state",)),
    Case({"verify": "all"}, ("verify",)),
    Case({"onUnloadable": "rewind"}, ("onUnloadable",)),
    Case({"flinkDefaults": ["execution.state-recovery.claim-mode"]}, ("flinkDefaults",)),
    Case({"flinkDefaults": {"execution.state-recovery.claim-mode": ["CLAIM"]}}, ("flinkDefaults",)),
    Case({"verifyBudget": 0}, ("verifyBudget",)),
    Case({"verifyBudget": 2.5}, ("verifyBudget",)),
    Case({"deadlineSeconds": 0}, ("deadlineSeconds",)),
    Case({"deadlineSeconds": -1}, ("deadlineSeconds",)),
    Case({"deadlineSeconds": "5"}, ("deadlineSeconds",)),
    Case({"deadlineSeconds": 31}, ("deadlineSeconds",)),
    Case({"storageOptions": {"s4": {}}}, ("storageOptions",)),
    Case({"storageOptions": {"s3": "endpoint"}}, ("storageOptions",)),
    Case({"storageOptions": {"s3": {"anon": "false"}}}, ("storageOptions",)),
    Case({"storageOptions": {"file": {"auto_mkdir": 1}}}, ("storageOptions",)),
    Case({"jobIdLabels": ["not a label"]}, ("jobIdLabels",)),
    Case({"jobIdLabels": []}, ("jobIdLabels",)),  # no jobId could ever be found
    Case({"jobIdLabels": ["a/b", "a/b"]}, ("jobIdLabels",)),
    Case({"jobIdLabels": None}, ("jobIdLabels",)),
    Case({"prefix": "Flink_Failover"}, ("prefix",)),
    Case({"prefix": None}, ("prefix",)),
    Case({"prefx": "flink-failover.io"}, ("prefx",)),
    Case({"operatorVersion": "1.6"}, ("operatorVersion",)),  # issue 31: the chart rendered it
    Case({"operatorVersion": "01.7"}, ("operatorVersion",)),
    Case({"operatorVersion": 1.10}, ("operatorVersion",)),  # unquoted: YAML reads 1.1
    Case({"fencing": {"onRenewFailure": "continue"}}, ("fencing.onRenewFailure",)),
    Case({"fencing": {"renewDeadlineSeconds": 0}}, ("fencing.renewDeadlineSeconds",)),
    Case({"fencing": {"enabled": "yes"}}, ("fencing.enabled",)),
    Case({"fencing": {"leaseSeconds": 4000}}, ("fencing.leaseSeconds",)),
    Case({"fencing": {"lease": 30}}, ("fencing.lease",)),
    # the rules between fields (issue 24: the chart rendered these and the pods crash-looped on them)
    Case({"allowedSchemes": ["s3"], "defaultCheckpointDir": "gs://bucket/chk"}, ("defaultCheckpointDir",)),
    Case({"allowedSchemes": ["s3"], "defaultSavepointDir": "/data/sp"}, ("defaultSavepointDir",)),
    # issue 35: fencing on a storage it cannot run on safely is refused at start, and by helm
    Case({"allowedSchemes": ["s3", "oss"]}, ("fencing",)),
    Case(
        {"allowedSchemes": ["hdfs"], "defaultCheckpointDir": "hdfs://namenode:8020/flink/chk"}, ("fencing",)
    ),
    Case({"allowedSchemes": ["oss"], "fencing": {"enabled": True, "leaseSeconds": 60}}, ("fencing",)),
    # two rules broken on one field: both reasons are said
    Case(
        {"fencing": {"pollSeconds": 20}},
        ("fencing.pollSeconds", "fencing.renewDeadlineSeconds", "fencing.renewDeadlineSeconds"),
    ),
    Case({"fencing": {"leaseSeconds": 10, "pollSeconds": 5}}, ("fencing.renewDeadlineSeconds",)),
    Case({"fencing": {"renewDeadlineSeconds": 16}}, ("fencing.renewDeadlineSeconds",)),
    Case({"fencing": {**FENCING_AT_LIMIT, "stopMarginSeconds": 8.5}}, ("fencing.renewDeadlineSeconds",)),
    Case({"fencing": {**FENCING_AT_LIMIT, "renewDeadlineSeconds": 15.5}}, ("fencing.renewDeadlineSeconds",)),
    # issue 28: no poll of slack left (the old default), and a deadline one failed renewal would reach
    Case({"fencing": {"renewDeadlineSeconds": 15}}, ("fencing.renewDeadlineSeconds",)),
    Case({"fencing": {"renewDeadlineSeconds": 8}}, ("fencing.renewDeadlineSeconds",)),
    Case(
        {
            "fencing": {
                "leaseSeconds": 20,
                "pollSeconds": 2,
                "renewDeadlineSeconds": 5,
                "stopMarginSeconds": 14,
            }
        },
        ("fencing.renewDeadlineSeconds",),
    ),
    # the chart's own rule: the webhook's timeoutSeconds (at most 30) must exceed the deadline
    Case({"deadlineSeconds": 30}, chart_refuses="the webhook's timeoutSeconds (at most 30) must exceed it"),
]


def server_errors(policy: dict[str, Any]) -> list[PolicyError]:
    try:
        policy_from_dict({"apiVersion": "flink-failover.io/v1alpha1", "kind": "RestorePolicy", **policy})
    except PolicyError as exc:
        return list(exc.errors)
    return []


def server_accepts(policy: dict[str, Any]) -> bool:
    return not server_errors(policy)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_server_names_the_fields_the_table_says(case: Case) -> None:
    assert tuple(e.field for e in server_errors(case.policy)) == case.refused


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_declared_schema_refuses_what_the_server_refuses_field_by_field(case: Case) -> None:
    """The JSON schema made from the declaration (what the chart embeds) against the server's validator:
    a field the server refuses on its own is invalid there too; the rules between fields are not the
    schema's (a template check each: the next test)."""
    alone = [e for e in server_errors(case.policy) if e.rule is None]
    assert bool(alone) == (not _schema_valid(case.policy)), [e.detail for e in alone]


def _schema_valid(policy: dict[str, Any]) -> bool:
    import jsonschema

    return jsonschema.Draft7Validator(json_schema()).is_valid(policy)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_helm_decides_as_the_server_and_a_rule_says_the_servers_words(
    helm: str, tmp_path: Path, case: Case
) -> None:
    values = {"member": {"fencing": {"cluster": "member1"}}, "policy": case.policy}
    result = template(helm, tmp_path, values)
    errors = server_errors(case.policy)
    if not errors and not case.chart_refuses:
        assert result.returncode == 0, result.stderr
        rendered = yaml.safe_load(one(_docs(result.stdout), "ConfigMap")["data"]["restore-policy.yaml"])
        assert policy_from_dict(rendered) == policy_from_dict(case.policy)  # what the pods will load
        return
    assert result.returncode != 0, f"helm rendered a policy the server refuses: {case.policy}"
    assert "nil pointer" not in result.stderr
    rules = [e for e in errors if e.rule is not None]
    if rules and len(rules) == len(errors):  # only rules broken: the template says the server's words
        assert f"policy.{rules[0].field}: {rules[0].detail}" in result.stderr, result.stderr
        return
    key = next(iter(case.policy))  # the schema names the key (a bad map key as the key itself)
    value = case.policy[key]
    named = [key, *(str(k) for k in value)] if isinstance(value, dict) else [key]
    assert any(n in result.stderr for n in named), result.stderr


def _docs(stdout: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(stdout) if doc]


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
