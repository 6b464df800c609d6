"""The label and annotation contract in code (webhook/common/contract.py) is the one the README states."""

from __future__ import annotations

import re

from tests.conftest import REPO
from webhook.common import contract
from webhook.controlplane import record
from webhook.policy.restore import RestorePolicy

WRITTEN_BY_CONTROL_PLANE = (
    contract.FAILOVER,
    contract.JOB_ID,
    contract.SOURCE_CLUSTER,
    contract.FAILOVER_TIME,
    contract.FAILOVER_COUNT,
    contract.REASON,
    contract.LAST_SAVEPOINT,
    contract.STARTED_FROM,
)
WRITTEN_BY_MEMBER = (
    contract.RESTORE_DECISION,
    contract.RESTORED_FROM,
    contract.RESTORED_JOB_ID,
    contract.RESTORE_RECORD,
)


def _readme_section(title: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_readme_table_lists_every_key_the_control_plane_writes() -> None:
    section = _readme_section("Label and annotation contract")
    table_keys = re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE)
    assert table_keys == [f"{contract.DEFAULT_PREFIX}/{name}" for name in WRITTEN_BY_CONTROL_PLANE]


def test_readme_names_every_key_the_member_writes_and_every_default_job_id_label() -> None:
    section = _readme_section("Label and annotation contract")
    for name in WRITTEN_BY_MEMBER:
        assert f"`{contract.DEFAULT_PREFIX}/{name}`" in section or f"`{name}`" in section, name
    for label in contract.DEFAULT_JOB_ID_LABELS[1:]:
        assert f"`{label}`" in section, label


def test_policy_prefix_moves_every_key() -> None:
    policy = RestorePolicy(prefix="failover.example.com")
    assert policy.contract.key(contract.RESTORED_FROM) == "failover.example.com/restored-from"
    assert policy.failover_label == "failover.example.com/failover"
    assert contract.Contract().key(contract.LAST_KNOWN_STATE) == "flink-failover.io/last-known-state"


def test_the_control_plane_record_uses_the_contract_name() -> None:
    assert (
        record.annotation_key(contract.Contract()) == f"{contract.DEFAULT_PREFIX}/{contract.LAST_KNOWN_STATE}"
    )
