"""A changelog checkpoint is restored only where Flink claims it: in NO_CLAIM mode (Flink's default)
Flink 2.3.0 restores the state, then fails the first checkpoint after it ("ChangelogStateBackend does
not support enforcing a full snapshot") and again after every restart. So the product passes such a
checkpoint over for the newest snapshot the job can restore (a savepoint), or holds the job naming the
setting; with CLAIM configured it restores the checkpoint as before.

Real trees written by Flink 1.20.5, 2.0.2 and 2.3.0 with the changelog state backend
(tests/fixtures/flink/*-changelog), through the member handler and the real server (gunicorn, TLS)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.flinktrees import Tree, materialize, tree
from tests.support.objects import apply, decode_patch, flink_deployment, flink_version, review
from tests.support.server import admitting
from webhook.common.admission import parse_review
from webhook.common.flink import FlinkResource
from webhook.common.flink_reads import (
    CHANGELOG_HANDLES,
    NOT_STATED,
    HandleMet,
    cannot_read,
    claim_mode_of,
    is_target_problem,
    target_of,
)
from webhook.member.handler import MemberHandler
from webhook.policy.restore import OnUnloadable, PolicyError, RestorePolicy, policy_from_dict
from webhook.restore.decide import restoring_flink

P = "flink-failover.io"
CHANGELOG = ("1.20.5-changelog", "2.0.2-changelog", "2.3.0-changelog")
NEW_KEY, OLD_KEY = "execution.state-recovery.claim-mode", "execution.savepoint-restore-mode"


# --- pure -----------------------------------------------------------------------------------------


def test_the_claim_mode_is_read_as_flink_reads_it() -> None:
    assert claim_mode_of({}) == ("NO_CLAIM", "Flink's default, no claim mode in flinkConfiguration")
    assert claim_mode_of({OLD_KEY: "claim"})[0] == "CLAIM"
    assert claim_mode_of({NEW_KEY: " Claim "}) == ("CLAIM", f"flinkConfiguration {NEW_KEY}: Claim")
    # The newer key wins over the older spelling, as in Flink.
    assert claim_mode_of({NEW_KEY: "NO_CLAIM", OLD_KEY: "CLAIM"})[0] == "NO_CLAIM"
    assert claim_mode_of({NEW_KEY: "", OLD_KEY: "LEGACY"})[0] == "LEGACY"


@pytest.mark.parametrize("code", sorted(CHANGELOG_HANDLES))
def test_a_changelog_handle_needs_claim_every_other_handle_does_not(code: int) -> None:
    met = (HandleMet(code, "operator 1 subtask 0 keyed state"),)
    unclaimed = target_of("v2_3", "", (), configuration={})
    why = cannot_read(unclaimed, 6, met)
    assert is_target_problem(why) and f"set {NEW_KEY}: CLAIM" in why
    assert why.startswith("Flink in NO_CLAIM mode (Flink's default, no claim mode in flinkConfiguration)")
    assert "operator 1 subtask 0 keyed state" in why
    # Each names the key its Flink reads: 1.20 reads the new key before the old one.
    assert cannot_read(target_of("v1_20", "", (), configuration={OLD_KEY: "NO_CLAIM"}), 4, met).endswith(
        f"; set {NEW_KEY}: CLAIM"
    )
    assert cannot_read(target_of("v1_19", "", (), configuration={NEW_KEY: "CLAIM"}), 4, met).endswith(
        f"; set {OLD_KEY}: CLAIM"
    )
    assert cannot_read(target_of("v2_3", "", (), configuration={NEW_KEY: "CLAIM"}), 6, met) == ""
    # Judged from the configuration even where the version is not known; not where it was not read.
    assert is_target_problem(cannot_read(target_of("", "", (), configuration={}), 6, met))
    assert cannot_read(NOT_STATED, 6, met) == ""
    others = tuple(HandleMet(c, "x") for c in range(1, 18) if c not in CHANGELOG_HANDLES)
    assert cannot_read(unclaimed, 6, others) == ""


def test_a_session_jobs_claim_mode_is_its_own_over_its_clusters() -> None:
    cluster_obj = flink_deployment(name="session")
    cluster_obj["spec"]["flinkConfiguration"][NEW_KEY] = "CLAIM"
    cluster = FlinkResource.from_object(cluster_obj)
    job_obj = flink_deployment(kind="FlinkSessionJob")
    job_obj["spec"]["flinkConfiguration"] = {}
    assert restoring_flink(FlinkResource.from_object(job_obj), cluster, RestorePolicy()).claim_mode == "CLAIM"
    job_obj["spec"]["flinkConfiguration"] = {NEW_KEY: "NO_CLAIM"}
    own = FlinkResource.from_object(job_obj)
    assert restoring_flink(own, cluster, RestorePolicy()).claim_mode == "NO_CLAIM"
    # Its cluster not read: nothing known, nothing judged.
    assert restoring_flink(own, None, RestorePolicy()).claim_mode == ""


# --- real changelog trees -------------------------------------------------------------------------


def deployment(each: Tree, root: Path, claim: dict[str, str], savepoints: bool = True) -> dict[str, Any]:
    url = materialize(each, root)
    url = "file://" + url.removeprefix("file:")
    if not savepoints:
        shutil.rmtree(root / "sp")
    obj = flink_deployment(
        checkpoint_dir=f"{url}/ck",
        savepoint_dir=f"{url}/sp" if savepoints else None,
        labels={f"{P}/failover": "true", f"{P}/job-id": each.job_id},
    )
    obj["spec"]["flinkVersion"] = flink_version(each.flink)
    obj["spec"]["flinkConfiguration"].update(claim)
    return obj


def answered(obj: dict[str, Any], policy: RestorePolicy | None = None) -> tuple[str, str, str]:
    """(initialSavepointPath, spec.job.state, the audit line's reason in full)."""
    handler = MemberHandler.from_policy(policy or RestorePolicy())
    try:
        out = handler(parse_review(review(obj)))
    finally:
        handler.close()
    response = out.to_review()["response"]
    assert response["allowed"], response
    job = apply(obj, decode_patch(response))["spec"]["job"]
    return str(job.get("initialSavepointPath", "")), str(job.get("state", "")), out.audit.reason


@pytest.mark.parametrize("name", CHANGELOG)
def test_without_claim_the_newest_savepoint_is_restored_and_the_checkpoints_are_passed_over(
    name: str, tmp_path: Path
) -> None:
    """Where the policy lets it rewind (onUnloadable: older); by default it is held (no silent rewind:
    tests/restore/test_no_silent_rewind.py)."""
    each = tree(name)
    obj = deployment(each, tmp_path, {})
    path, state, said = answered(obj, RestorePolicy(on_unloadable=OnUnloadable.OLDER))
    assert path.startswith(f"file://{tmp_path}/sp/savepoint-{each.job_id[:6]}-") and state == ""
    for n in each.checkpoints():
        assert f"chk-{n}: Flink in NO_CLAIM mode" in said, said
    assert "skipped chk-" in said


@pytest.mark.parametrize("name", CHANGELOG)
def test_without_claim_and_without_a_savepoint_the_job_is_held_naming_the_setting(
    name: str, tmp_path: Path
) -> None:
    each = tree(name)
    for claim in ({}, {OLD_KEY: "LEGACY"}, {NEW_KEY: "no_claim"}):
        obj = deployment(each, tmp_path / str(len(claim)) / claim.get(OLD_KEY, "x"), claim, savepoints=False)
        path, state, said = answered(obj)
        assert (path, state) == ("", "suspended"), said
        assert said.startswith("the restoring Flink cannot load any snapshot left: "), said
        assert "a changelog checkpoint restores only in CLAIM mode" in said and ": CLAIM" in said


@pytest.mark.parametrize("name", CHANGELOG)
def test_with_claim_either_spelling_the_newest_checkpoint_is_restored(name: str, tmp_path: Path) -> None:
    each = tree(name)
    for key in (NEW_KEY, OLD_KEY):
        obj = deployment(each, tmp_path / key, {key: "claim"})
        path, state, said = answered(obj)
        assert path == f"file://{tmp_path / key}/ck/{each.job_id}/chk-{each.checkpoints()[0]}", said
        assert state == "" and "skipped" not in said


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with admitting(tmp_path_factory.mktemp("served")) as admit:
        yield admit


def test_the_served_webhook_holds_an_unclaimed_changelog_job_and_says_why(
    served: Any, tmp_path: Path
) -> None:
    each = tree("2.3.0-changelog")
    obj = deployment(each, tmp_path / "held", {}, savepoints=False)
    response = served(obj)
    job = apply(obj, decode_patch(response))["spec"]["job"]
    assert job.get("state") == "suspended" and "initialSavepointPath" not in job
    assert response["warnings"][0].startswith(
        "job held suspended: the restoring Flink cannot load any snapshot left: "
        f"chk-{each.checkpoints()[0]}: Flink in NO_CLAIM mode"
    )
    obj = deployment(each, tmp_path / "claimed", {NEW_KEY: "CLAIM"})
    job = apply(obj, decode_patch(served(obj)))["spec"]["job"]
    assert job["initialSavepointPath"].endswith(f"/ck/{each.job_id}/chk-{each.checkpoints()[0]}")


# --- which key each Flink reads (issue 46) --------------------------------------------------------


def test_each_flink_reads_the_claim_mode_from_its_own_key() -> None:
    """Flink 1.15-1.19 read only execution.savepoint-restore-mode (SavepointConfigOptions); 1.20 and 2.x
    read execution.state-recovery.claim-mode, with the old key as its deprecated spelling
    (StateRecoveryOptions); Flink before 1.15 has no claim mode."""

    def mode(version: str, conf: dict[str, str]) -> str:
        return target_of(version, "", (), configuration=conf).claim_mode

    for version in ("v1_15", "v1_19"):
        assert mode(version, {NEW_KEY: "CLAIM"}) == "NO_CLAIM"  # the new key means nothing to it
        assert mode(version, {OLD_KEY: "claim"}) == "CLAIM"
        assert mode(version, {NEW_KEY: "NO_CLAIM", OLD_KEY: "CLAIM"}) == "CLAIM"
    for version in ("v1_20", "v2_0", "v2_3"):
        assert mode(version, {NEW_KEY: "CLAIM"}) == "CLAIM"
        assert mode(version, {OLD_KEY: "CLAIM"}) == "CLAIM"  # the deprecated key, where the new is not set
        assert mode(version, {NEW_KEY: "NO_CLAIM", OLD_KEY: "CLAIM"}) == "NO_CLAIM"  # the new key wins
    assert mode("v1_14", {OLD_KEY: "CLAIM", NEW_KEY: "CLAIM"}) == "LEGACY"
    # Its version not known: CLAIM only where both readings agree.
    assert mode("", {NEW_KEY: "CLAIM"}) == "NO_CLAIM"
    assert mode("", {NEW_KEY: "CLAIM", OLD_KEY: "CLAIM"}) == "CLAIM"
    # Spec and image running different Flinks: each must read CLAIM.
    both = target_of("v1_20", "flink:1.19.3", (("flink:1.19*", "v1_19"),), configuration={NEW_KEY: "CLAIM"})
    assert both.claim_mode == "NO_CLAIM" and both.claim_fix == f"set {OLD_KEY}: CLAIM"
    told = target_of("v1_19", "", (), configuration={NEW_KEY: "CLAIM"}).claim_source
    assert told == (
        f"Flink 1.19 reads only {OLD_KEY}: Flink's default, no {OLD_KEY} in flinkConfiguration; "
        f"{NEW_KEY}: CLAIM (flinkConfiguration) is read from Flink 1.20 on"
    )


def test_the_operators_defaults_count_under_the_jobs_and_its_clusters_settings() -> None:
    """policy flinkDefaults mirrors the operator's defaultConfiguration: under the session cluster's and
    the job's own settings; where it is not set, the default it stands for is told as not known."""
    job = FlinkResource.from_object(flink_deployment())
    defaults = RestorePolicy(flink_defaults=((NEW_KEY, "CLAIM"),))
    assert restoring_flink(job, None, defaults).claim_mode == "CLAIM"
    assert restoring_flink(job, None, defaults).claim_source == (
        f"policy flinkDefaults (the operator's defaultConfiguration) {NEW_KEY}: CLAIM"
    )
    unknown = restoring_flink(job, None, RestorePolicy())
    assert unknown.claim_mode == "NO_CLAIM"
    assert unknown.claim_source.endswith(
        "; the operator's defaultConfiguration is not known (policy flinkDefaults not set)"
    )
    job_obj = flink_deployment(kind="FlinkSessionJob")
    job_obj["spec"]["flinkConfiguration"] = {}
    cluster_obj = flink_deployment(name="session")
    cluster_obj["spec"]["flinkConfiguration"][NEW_KEY] = "NO_CLAIM"
    session_job = FlinkResource.from_object(job_obj)
    cluster = FlinkResource.from_object(cluster_obj)
    assert restoring_flink(session_job, cluster, defaults).claim_mode == "NO_CLAIM"  # the cluster's over
    # A 1.20 job reading the new key from the defaults over the old key of its own: as Flink reads the
    # merged configuration, the new key wins wherever it is set.
    own = FlinkResource.from_object({**flink_deployment(), "spec": {
        **flink_deployment()["spec"], "flinkConfiguration": {OLD_KEY: "CLAIM"}}})  # fmt: skip
    assert restoring_flink(own, None, RestorePolicy(flink_defaults=((NEW_KEY, "NO_CLAIM"),))).claim_mode == (
        "NO_CLAIM"
    )


def test_the_policy_field_flink_defaults() -> None:
    nested = policy_from_dict({"flinkDefaults": {"execution": {"state-recovery": {"claim-mode": "CLAIM"}}}})
    assert nested.flink_defaults == ((NEW_KEY, "CLAIM"),)
    assert policy_from_dict({}).flink_defaults is None
    assert policy_from_dict({"flinkDefaults": {OLD_KEY: "CLAIM"}}).flink_defaults == ((OLD_KEY, "CLAIM"),)
    with pytest.raises(PolicyError, match="flinkDefaults: must map Flink configuration keys"):
        policy_from_dict({"flinkDefaults": [NEW_KEY]})


def test_a_1_20_changelog_checkpoint_on_flink_1_19_is_claimed_only_by_the_old_key(tmp_path: Path) -> None:
    """Real Flink 1.20.5 changelog checkpoints (format 4, handles up to 14: Flink 1.19 loads them) on a
    v1_19 target: the new key alone leaves 1.19 in NO_CLAIM, so the job is held naming the old key."""
    each = tree("1.20.5-changelog")
    top = each.checkpoints()[0]
    obj = deployment(each, tmp_path / "new", {NEW_KEY: "CLAIM"}, savepoints=False)
    obj["spec"]["flinkVersion"] = "v1_19"
    path, state, said = answered(obj)
    assert (path, state) == ("", "suspended"), said
    assert said.startswith(
        f"the restoring Flink cannot load any snapshot left: chk-{top}: Flink in NO_CLAIM mode (Flink 1.19 "
        f"reads only {OLD_KEY}: "
    ), said
    assert f"{NEW_KEY}: CLAIM (flinkConfiguration) is read from Flink 1.20 on" in said
    assert f"set {OLD_KEY}: CLAIM" in said
    for key, version in ((OLD_KEY, "v1_19"), (OLD_KEY, "v1_20"), (NEW_KEY, "v1_20")):
        obj = deployment(each, tmp_path / key / version, {key: "CLAIM"}, savepoints=False)
        obj["spec"]["flinkVersion"] = version
        path, state, said = answered(obj)
        assert path.endswith(f"/ck/{each.job_id}/chk-{top}") and state == "", said


@pytest.mark.parametrize("name", ("2.0.2-changelog", "2.3.0-changelog"))
def test_flink_2_reads_the_old_key_as_the_new_ones_alias_and_the_new_key_first(
    name: str, tmp_path: Path
) -> None:
    each = tree(name)
    top = each.checkpoints()[0]
    obj = deployment(each, tmp_path / "alias", {OLD_KEY: "CLAIM"}, savepoints=False)
    path, state, said = answered(obj)
    assert path.endswith(f"/chk-{top}") and state == "", said
    obj = deployment(each, tmp_path / "both", {OLD_KEY: "CLAIM", NEW_KEY: "NO_CLAIM"}, savepoints=False)
    path, state, said = answered(obj)
    assert (path, state) == ("", "suspended") and f"flinkConfiguration {NEW_KEY}: NO_CLAIM" in said


@pytest.mark.parametrize("name", CHANGELOG)
def test_the_operators_default_claim_mode_restores_a_changelog_checkpoint(name: str, tmp_path: Path) -> None:
    each = tree(name)
    top = each.checkpoints()[0]
    obj = deployment(each, tmp_path / "d", {}, savepoints=False)
    claimed = RestorePolicy(flink_defaults=((NEW_KEY, "CLAIM"), (OLD_KEY, "CLAIM")))
    path, state, said = answered(obj, claimed)
    assert path.endswith(f"/ck/{each.job_id}/chk-{top}") and state == "", said
    # Not stated: the hold tells that the operator's defaults were not known.
    path, state, said = answered(obj)
    assert state == "suspended" and "policy flinkDefaults not set" in said


def test_the_served_webhook_holds_a_v1_19_job_claimed_by_the_new_key_only(
    served: Any, tmp_path: Path
) -> None:
    each = tree("1.20.5-changelog")
    obj = deployment(each, tmp_path, {NEW_KEY: "CLAIM"}, savepoints=False)
    obj["spec"]["flinkVersion"] = "v1_19"
    response = served(obj)
    job = apply(obj, decode_patch(response))["spec"]["job"]
    assert job.get("state") == "suspended" and "initialSavepointPath" not in job
    assert response["warnings"][0].startswith(
        "job held suspended: the restoring Flink cannot load any snapshot left: "
        f"chk-{each.checkpoints()[0]}: Flink in NO_CLAIM mode (Flink 1.19 reads only {OLD_KEY}"
    )
