"""Property tests: every patch applies cleanly to the object it was computed for, and the result is a
valid FlinkDeployment / FlinkSessionJob per the upstream CRDs."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.crds import crd_validator
from tests.support.objects import JOB_ID, flink_deployment, make_checkpoints, review
from webhook.common.admission import parse_review
from webhook.common.patch import escape, set_fields
from webhook.member.handler import MemberHandler
from webhook.policy.restore import Fallback, RestorePolicy

label_keys = st.from_regex(
    r"\A([a-z0-9]([a-z0-9.~/-]{0,20}[a-z0-9])?/)?[a-zA-Z0-9]([a-zA-Z0-9_.~-]{0,20})?\Z"
)
label_values = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.~/", max_size=30)
maps = st.dictionaries(label_keys, label_values, max_size=4)


@given(
    existing=st.one_of(st.none(), maps),
    wanted=st.dictionaries(label_keys, label_values, min_size=1, max_size=4),
    with_metadata=st.booleans(),
)
def test_set_fields_applies_cleanly_and_reaches_the_target(
    existing: dict[str, str] | None, wanted: dict[str, str], with_metadata: bool
) -> None:
    obj: dict[str, Any] = {"spec": {}}
    if with_metadata:
        obj["metadata"] = {"name": "x"}
        if existing is not None:
            obj["metadata"]["annotations"] = dict(existing)
    ops = set_fields(obj, ("metadata", "annotations"), wanted)
    patched = jsonpatch.apply_patch(obj, ops)  # raises on a patch that does not apply
    result = patched["metadata"]["annotations"]
    for key, value in wanted.items():
        assert result[key] == value
    for key, value in (existing or {}).items() if with_metadata else ():
        if key not in wanted:
            assert result[key] == value  # nothing else is lost
    again = set_fields(patched, ("metadata", "annotations"), wanted)
    assert again == []  # idempotent: no op when already there


def test_escape_follows_rfc6901() -> None:
    assert escape("flink-failover.io/job-id") == "flink-failover.io~1job-id"
    assert escape("a~b/c") == "a~0b~1c"


class Validators(dict[str, Any]):
    def __repr__(self) -> str:  # keep hypothesis' failure reports readable
        return "<CRD validators>"


@pytest.fixture(scope="module")
def validators(shared_data: Path) -> dict[str, Any]:
    crds = shared_data / "crds" / "flink"
    return Validators(
        {
            "FlinkDeployment": crd_validator(crds / "flinkdeployments.flink.apache.org-v1.yml", "v1beta1"),
            "FlinkSessionJob": crd_validator(crds / "flinksessionjobs.flink.apache.org-v1.yml", "v1beta1"),
        }
    )


_ckpt_root = Path(tempfile.mkdtemp(prefix="ff-prop-"))
make_checkpoints(_ckpt_root / JOB_ID, [1, 5])
_empty_root = Path(tempfile.mkdtemp(prefix="ff-prop-empty-"))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["FlinkDeployment", "FlinkSessionJob"]),
    annotations=st.one_of(st.none(), maps),
    extra_labels=maps,
    has_state=st.booleans(),
    upgrade_mode=st.sampled_from([None, "stateless", "savepoint", "last-state"]),
    state=st.sampled_from([None, "running", "suspended"]),
    savepoint_dir=st.booleans(),
    nested=st.booleans(),
    on_missing=st.sampled_from([Fallback.SUSPEND, Fallback.ALLOW]),
)
def test_member_patches_apply_and_validate_against_the_crds(
    validators: dict[str, Any],
    kind: str,
    annotations: dict[str, str] | None,
    extra_labels: dict[str, str],
    has_state: bool,
    upgrade_mode: str | None,
    state: str | None,
    savepoint_dir: bool,
    nested: bool,
    on_missing: Fallback,
) -> None:
    root = _ckpt_root if has_state else _empty_root
    if kind == "FlinkSessionJob" and upgrade_mode == "last-state":
        upgrade_mode = "savepoint"  # the operator rejects last-state for session jobs before we see it
    obj = flink_deployment(
        kind=kind,
        checkpoint_dir=str(root),
        savepoint_dir=str(root / "sp") if savepoint_dir else None,
        nested_config=nested,
        labels={**extra_labels, "flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB_ID},
        annotations=annotations,
    )
    if upgrade_mode:
        obj["spec"]["job"]["upgradeMode"] = upgrade_mode
    if state:
        obj["spec"]["job"]["state"] = state
    handler = MemberHandler.from_policy(RestorePolicy(on_missing_state=on_missing))
    resp = handler(parse_review(review(obj)))
    handler.close()
    assert resp.allowed
    patched = jsonpatch.apply_patch(obj, resp.patch)
    errors = sorted(validators[kind].iter_errors(patched), key=str)
    assert not errors, [e.message for e in errors]
    job = patched["spec"]["job"]
    if has_state:
        assert job["initialSavepointPath"] == f"{root}/{JOB_ID}/chk-5"
    elif on_missing is Fallback.SUSPEND:
        assert job["state"] == "suspended"
    if job.get("upgradeMode", "stateless") != "stateless":
        # the operator's validator: a stateful upgradeMode needs a checkpoint dir
        # (and savepoint mode a savepoint dir)
        conf = patched["spec"]["flinkConfiguration"]
        assert conf
        if job["upgradeMode"] == "savepoint" and upgrade_mode != "savepoint":
            assert savepoint_dir
