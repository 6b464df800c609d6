"""Issue 17 item 13: what the README tells a new user is complete and consistent (each failed before):
every restore-policy field in the policy table (``prefix`` was missing), every ``decision`` value of
``flink_failover_admissions_total`` named, one spelling of the command in the examples."""

from __future__ import annotations

import re

from tests.conftest import REPO
from webhook.controlplane.audit import WorkDecision
from webhook.policy.restore import POLICY
from webhook.restore.outcome import RestoreOutcome

README = (REPO / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_the_policy_table_lists_every_field() -> None:
    table = section("Restore policy")
    named = set(re.findall(r"^\| `([A-Za-z]+)`", table, re.M))
    named |= set(re.findall(r"^\| `[A-Za-z]+` / `([A-Za-z]+)`", table, re.M))
    assert set(POLICY.keys) <= named, sorted(set(POLICY.keys) - named)


def test_every_admission_decision_is_documented() -> None:
    server = section("Server")
    for value in [*RestoreOutcome, *WorkDecision]:
        assert f"`{value.value}`" in server, value


def test_examples_use_one_spelling_of_the_command() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    commands = [line for block in blocks for line in block.splitlines() if "flink-failover " in line]
    assert commands and not [c for c in commands if ".venv/bin/flink-failover" in c], commands
