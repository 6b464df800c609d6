"""No silent rewind (issue 46): when the newest complete snapshot is passed over only because the
restoring Flink cannot load it (its version, its claim mode, 1.x state into Flink 2), the job is held
with the reason and what loads it, unless the policy's ``onUnloadable: older`` lets it restore older
state, and then a warning says how much newer state it leaves behind. Damaged snapshots are passed over
as before.

Real trees written by Flink 1.20.5, 2.0.2 and 2.3.0 (tests/fixtures/flink) through the member handler,
and one through the real server (gunicorn, TLS)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.flinktrees import Tree, materialize, tree
from tests.support.objects import apply, decode_patch, flink_deployment, flink_version, review
from tests.support.server import admitting
from webhook.common.admission import parse_review
from webhook.common.flink_reads import Unloadable, unloadable, what_loads
from webhook.member.handler import MemberHandler
from webhook.policy.restore import OnUnloadable, PolicyError, RestorePolicy, policy_from_dict

P = "flink-failover.io"
CHANGELOG = ("1.20.5-changelog", "2.0.2-changelog", "2.3.0-changelog")


def older() -> RestorePolicy:
    """The policy letting a restore rewind (onUnloadable: older)."""
    return RestorePolicy(on_unloadable=OnUnloadable.OLDER)


def url_of(root: Path) -> str:
    return f"file://{root}"


def deployment(each: Tree, root: Path, version: str = "", **conf: str) -> dict[str, Any]:
    materialize(each, root)
    obj = flink_deployment(
        checkpoint_dir=f"{url_of(root)}/ck",
        savepoint_dir=f"{url_of(root)}/sp",
        labels={f"{P}/failover": "true", f"{P}/job-id": each.job_id},
    )
    obj["spec"]["flinkVersion"] = version or flink_version(each.flink)
    obj["spec"]["flinkConfiguration"].update(conf)
    return obj


def answered(obj: dict[str, Any], policy: RestorePolicy | None = None) -> tuple[str, str, str, list[str]]:
    """(initialSavepointPath, spec.job.state, the audit line's reason in full, the warnings)."""
    handler = MemberHandler.from_policy(policy or RestorePolicy())
    try:
        out = handler(parse_review(review(obj)))
    finally:
        handler.close()
    response = out.to_review()["response"]
    assert response["allowed"], response
    job = apply(obj, decode_patch(response))["spec"]["job"]
    warnings = list(response.get("warnings", []))
    return str(job.get("initialSavepointPath", "")), str(job.get("state", "")), out.audit.reason, warnings


INTERVAL = {"execution.checkpointing.interval": "2 s"}  # the trees' jobs checkpointed every 2 s


# --- a changelog job in NO_CLAIM ------------------------------------------------------------------


@pytest.mark.parametrize("name", CHANGELOG)
def test_an_unclaimed_changelog_job_is_held_rather_than_rewound_to_its_canonical_savepoint(
    name: str, tmp_path: Path
) -> None:
    """Its checkpoints (ids 6, 8, 9) and its native savepoint (id 7) hold changelog handles; only its
    canonical savepoint (id 4) restores in NO_CLAIM: five checkpoint ids older."""
    each = tree(name)
    obj = deployment(each, tmp_path, **INTERVAL)
    path, state, said, warnings = answered(obj)
    assert (path, state) == ("", "suspended"), said
    canonical, native = each.savepoint("canonical"), each.savepoint("native")
    key = "execution.state-recovery.claim-mode"
    assert said.startswith(
        f"held rather than rewound: the newest snapshot, chk-9, loads if you set {key}: CLAIM; restoring "
        f"the older {canonical} (checkpoint id 4) would leave 4 newer snapshots behind (chk-9, chk-8, "
        f"{native} (checkpoint id 7) and 1 more; 5 checkpoint ids newer, about 10 s at "
        "execution.checkpointing.interval 2 s) (policy onUnloadable: hold). "
    ), said
    job_dir = f"{url_of(tmp_path)}/ck/{each.job_id}"
    assert (
        f"To restore the newest: set {key}: CLAIM, then spec.job.initialSavepointPath {job_dir}/chk-9; to "
        f"restore the older: spec.job.initialSavepointPath {url_of(tmp_path)}/sp/{canonical}. chk-9: Flink "
        "in NO_CLAIM mode"
    ) in said
    assert warnings[0].startswith("job held suspended: held rather than rewound: the newest snapshot, chk-9")


@pytest.mark.parametrize("name", CHANGELOG)
def test_an_unclaimed_changelog_job_restores_its_canonical_savepoint_where_the_policy_allows(
    name: str, tmp_path: Path
) -> None:
    each = tree(name)
    obj = deployment(each, tmp_path, **INTERVAL)
    path, state, said, warnings = answered(obj, older())
    canonical = each.savepoint("canonical")
    assert (path, state) == (f"{url_of(tmp_path)}/sp/{canonical}", ""), said
    assert warnings[0] == f"restoring from savepoint {url_of(tmp_path)}/sp/{canonical} (checkpoint id 4)"
    rewound = (
        f"rewound: restored the older {canonical} (checkpoint id 4), leaving 4 newer snapshots behind "
        f"(chk-9, chk-8, {each.savepoint('native')} (checkpoint id 7) and 1 more; 5 checkpoint ids newer, "
        "about 10 s at execution.checkpointing.interval 2 s) that the restoring Flink cannot load (the "
        "newest loads if you set execution.state-recovery.claim-mode: CLAIM; policy onUnloadable: older). "
        "chk-9: "
    )
    assert warnings[1].startswith(rewound[:200])
    assert f"; {rewound}" in said


@pytest.mark.parametrize("name", CHANGELOG)
def test_a_claimed_changelog_job_restores_its_newest_checkpoint(name: str, tmp_path: Path) -> None:
    each = tree(name)
    obj = deployment(each, tmp_path, **{"execution.savepoint-restore-mode": "CLAIM"})
    path, state, said, _ = answered(obj)
    assert (path, state) == (f"{url_of(tmp_path)}/ck/{each.job_id}/chk-9", ""), said
    assert "rewound" not in said


# --- a 2.x job failing over to a 1.20 member ------------------------------------------------------


def mixed(tmp_path: Path) -> tuple[dict[str, Any], str]:
    """Flink 2.3.0's checkpoints chk-7 and chk-8 (format 6) over Flink 1.20.5's chk-5 (format 4) in one
    job directory, each _metadata naming files that are there: a job upgraded to 2.3 whose copy fails
    over to a member still on 1.20."""
    new, old = tree("2.3.0-hashmap-files"), tree("1.20.5-hashmap-files")
    materialize(old, tmp_path / "old")
    obj = deployment(new, tmp_path / "new", "v1_20", **INTERVAL)
    job_dir = tmp_path / "new" / "ck" / new.job_id
    shutil.rmtree(job_dir / "chk-5")
    shutil.copytree(tmp_path / "old" / "ck" / old.job_id / "chk-5", job_dir / "chk-5")
    return obj, f"{url_of(tmp_path / 'new')}/ck/{new.job_id}"


def test_a_2_3_job_on_a_1_20_member_is_held_rather_than_rewound(tmp_path: Path) -> None:
    obj, job_dir = mixed(tmp_path)
    path, state, said, warnings = answered(obj)
    assert (path, state) == ("", "suspended"), said
    assert said.startswith(
        "held rather than rewound: the newest snapshot, chk-8, loads if you run Flink 2.1+; restoring the "
        "older chk-5 (checkpoint id 5) would leave 3 newer snapshots behind (chk-8, chk-7, "
    ), said
    assert "3 checkpoint ids newer, about 6 s at execution.checkpointing.interval 2 s" in said
    assert (
        f"To restore the newest: run Flink 2.1+, then spec.job.initialSavepointPath {job_dir}/chk-8"
    ) in said
    assert said.count("cannot load it: format version 6 (Flink 2.1+ reads it; 1.20 reads up to 4)") >= 3
    # Where the policy allows it, the 1.20 checkpoint is restored, and what is left behind is told.
    path, state, said, warnings = answered(obj, older())
    assert (path, state) == (f"{job_dir}/chk-5", ""), said
    assert warnings[1].startswith("rewound: restored the older chk-5 (checkpoint id 5), leaving 3 newer")
    # The Flink that wrote the newest restores it.
    obj["spec"]["flinkVersion"] = "v2_3"
    assert answered(obj)[:2] == (f"{job_dir}/chk-8", "")


def test_the_state_a_job_started_from_is_no_silent_rewind_either(tmp_path: Path) -> None:
    """Nothing of its own loads on 1.20 (2.3.0's checkpoints and savepoints); the 1.20 snapshot it
    started from does, and is older than all of them: held, the lineage named."""
    new, old = tree("2.3.0-hashmap-files"), tree("1.20.5-hashmap-files")
    obj = deployment(new, tmp_path / "new", "v1_20")
    floor_dir = tmp_path / "new" / "ck" / old.job_id
    materialize(old, tmp_path / "old")
    shutil.copytree(tmp_path / "old" / "ck" / old.job_id / "chk-8", floor_dir / "chk-8")
    floor = f"{url_of(tmp_path / 'new')}/ck/{old.job_id}/chk-8"
    obj["metadata"].setdefault("annotations", {})[f"{P}/started-from"] = floor
    path, state, said, _ = answered(obj)
    assert (path, state) == ("", "suspended"), said
    assert said.startswith(
        "held rather than rewound: the newest snapshot, chk-8, loads if you run Flink 2.1+; restoring the "
        "older the snapshot it started from, chk-8 (checkpoint id 8) would leave 5 newer snapshots behind"
    ), said
    path, state, said, _ = answered(obj, older())
    assert (path, state) == (floor, ""), said
    assert (
        "it was started from" in said and "rewound: restored the older the snapshot it started from" in said
    )


# --- 1.x state into Flink 2 -----------------------------------------------------------------------


@pytest.mark.parametrize("version", ("v2_0", "v2_3"))
def test_1_x_state_restored_by_flink_2_is_judged_and_held(version: str, tmp_path: Path) -> None:
    """Flink 2 does not promise to restore the state of Flink 1.x: a 1.20.5 tree (format 4) is held on a
    Flink 2 target, naming the 1.x that loads it, whatever the policy's onMissingState says."""
    each = tree("1.20.5-hashmap-files")
    obj = deployment(each, tmp_path / version, version)
    release = f"{version[1]}.{version[3]}"
    for policy in (RestorePolicy(), older()):
        path, state, said, _ = answered(obj, policy)
        assert (path, state) == ("", "suspended"), said
        assert said.startswith(
            f"the restoring Flink cannot load any snapshot left: chk-8: Flink {release} (spec.flinkVersion "
            f"{version}) cannot load it: format version 4, written by Flink 1.x (Flink 2.x writes 5 and "
            "newer): Flink 2 does not promise to restore the state of Flink 1.x; a Flink 1.x that reads it "
            "loads it (spec.flinkVersion v1_20)"
        ), said
    obj["spec"]["flinkVersion"] = "v1_20"
    assert answered(obj)[:2] == (f"{url_of(tmp_path / version)}/ck/{each.job_id}/chk-8", "")


def test_2_0_state_on_flink_2_3_is_not_1_x_state(tmp_path: Path) -> None:
    each = tree("2.0.2-sources")
    obj = deployment(each, tmp_path, "v2_3")
    assert answered(obj)[:2] == (f"{url_of(tmp_path)}/ck/{each.job_id}/chk-9", "")


# --- damage is passed over as before --------------------------------------------------------------


def test_a_damaged_newest_checkpoint_is_passed_over_without_a_hold(tmp_path: Path) -> None:
    """A file chk-8 names is gone: damage, not the target's Flink. chk-7 is restored (no hold), as
    before issue 46, even with the default onUnloadable: hold."""
    each = tree("2.3.0-hashmap-files")
    obj = deployment(each, tmp_path)
    chk = tmp_path / "ck" / each.job_id / "chk-8"
    named = sorted(p for p in chk.iterdir() if p.name != "_metadata")
    os.remove(named[0])
    path, state, said, _ = answered(obj)
    assert (path, state) == (f"{url_of(tmp_path)}/ck/{each.job_id}/chk-7", ""), said
    assert "skipped chk-8: 1 of the" in said and "rewound" not in said


def test_a_damaged_checkpoint_id_is_damage_before_it_is_a_version(tmp_path: Path) -> None:
    """A chk-8 holding the _metadata of checkpoint 7 is a copy in the wrong place, whatever Flink reads
    it: passed over, not held for."""
    new, old = tree("2.3.0-hashmap-files"), tree("1.20.5-hashmap-files")
    obj = deployment(old, tmp_path / "old", "v1_20")
    materialize(new, tmp_path / "new")
    job_dir = tmp_path / "old" / "ck" / old.job_id
    shutil.copyfile(
        tmp_path / "new" / "ck" / new.job_id / "chk-7" / "_metadata", job_dir / "chk-8" / "_metadata"
    )
    path, state, said, _ = answered(obj)
    assert (path, state) == (f"{url_of(tmp_path / 'old')}/ck/{old.job_id}/chk-7", ""), said
    assert "skipped chk-8: _metadata is that of checkpoint 7, not 8" in said


# --- the policy field and the reasons read back ---------------------------------------------------


def test_the_policy_field_on_unloadable() -> None:
    assert policy_from_dict({}).on_unloadable is OnUnloadable.HOLD
    assert policy_from_dict({"onUnloadable": "older"}).on_unloadable is OnUnloadable.OLDER
    with pytest.raises(PolicyError, match="onUnloadable"):
        policy_from_dict({"onUnloadable": "rewind"})


def test_the_lookups_reasons_read_back() -> None:
    why = "Flink 1.20 (spec.flinkVersion v1_20) cannot load it: format version 6 (Flink 2.1+ reads it; x)"
    assert unloadable(f"chk-11: {why}") == Unloadable("checkpoint", "chk-11", 11, why)
    assert unloadable(f"savepoint s3://b/sp/savepoint-0a0b0c-0123456789ab: {why}; checkpoint id 10") == (
        Unloadable("savepoint", "s3://b/sp/savepoint-0a0b0c-0123456789ab", 10, f"{why}; checkpoint id 10")
    )
    assert unloadable("savepoint s3://b/sp/x: " + why).checkpoint_id is None  # type: ignore[union-attr]
    assert unloadable("chk-9: 1 of the 25 files its _metadata names is missing, the first ...") is None
    assert unloadable(f"started from s3://b/ck/j/chk-3: {why}") is None
    assert what_loads(why) == "run Flink 2.1+"
    claim = "Flink in NO_CLAIM mode (...) cannot load it: ...; set execution.savepoint-restore-mode: CLAIM"
    assert what_loads(claim) == "set execution.savepoint-restore-mode: CLAIM"


# --- through the served webhook -------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with admitting(tmp_path_factory.mktemp("served")) as admit:
        yield admit


def test_the_served_webhook_holds_rather_than_rewinds(served: Any, tmp_path: Path) -> None:
    each = tree("2.3.0-changelog")
    obj = deployment(each, tmp_path)
    response = served(obj)
    job = apply(obj, decode_patch(response))["spec"]["job"]
    assert job.get("state") == "suspended" and "initialSavepointPath" not in job
    assert response["warnings"][0].startswith(
        "job held suspended: held rather than rewound: the newest snapshot, chk-9, loads if you set "
        "execution.state-recovery.claim-mode: CLAIM; restoring the older "
    )


def test_a_fencing_release_never_starts_older_state_in_its_stead() -> None:
    """The release of a held copy resolves again (the stale copy went on checkpointing); when the newest
    state it finds is one this cluster's Flink cannot load, the job stays held with that reason. Before,
    the lookup's hold read as "nothing restorable" and the release started from the admitted path."""
    from webhook.fencing.starts import Unresolved, newest_known
    from webhook.restore.outcome import RestoreDecision, RestoreOutcome

    why = "held rather than rewound: the newest snapshot, chk-12, loads if you run Flink 2.1+"
    held = RestoreDecision(RestoreOutcome.SUSPENDED, why, unloadable=True)
    assert newest_known(held, None, "s3://b/c/job/chk-10") == Unresolved(why)
    nothing = RestoreDecision(RestoreOutcome.SUSPENDED, "no restorable checkpoint or savepoint")
    assert newest_known(nothing, None, "") == ""


def test_a_restore_of_older_state_says_what_it_left_behind_in_an_event() -> None:
    """``onUnloadable: older``: the restore goes ahead, and a Warning Event (not only the answer's
    warning) names the newer state left behind."""
    from tests.support.objects import flink_deployment, review
    from webhook.common.admission import parse_review
    from webhook.member.handler import admission_events
    from webhook.policy.restore import RestorePolicy
    from webhook.restore.outcome import RestoreDecision, RestoreOutcome

    rewound = (
        "rewound: restored the older chk-10, leaving chk-11..chk-12 that the restoring Flink cannot load"
    )
    decision = RestoreDecision(
        RestoreOutcome.RESTORED, "restoring", path="s3://b/c/chk-10", warnings=("restoring from ...", rewound)
    )
    request = parse_review(review(flink_deployment()))
    found = {(o.reason, o.note) for o in admission_events(request, decision, RestorePolicy())}
    assert ("Rewound", rewound) in found
    assert not any(
        o.reason == "Rewound"
        for o in admission_events(request, RestoreDecision(RestoreOutcome.RESTORED, "r"), RestorePolicy())
    )


# --- the fencing agent's resume: the same rule ----------------------------------------------------


def resumed(obj: dict[str, Any], policy: RestorePolicy) -> tuple[str | None, list[Any], list[Any]]:
    """The fencing agent resumes a stepped-down copy of ``obj`` (its real executors, the real storage):
    (what went wrong, the patches it sent, the Events it told)."""
    import asyncio

    from tests.support.agents import PatchesOnly
    from webhook.fencing.agent import FencingAgent
    from webhook.fencing.copies import read_copy
    from webhook.restore.storage.search import CheckpointStorage

    api = PatchesOnly()
    told: list[Any] = []

    class Events:
        def record(self, occurrence: Any) -> None:
            told.append(occurrence)

    obj["spec"]["job"]["state"] = "suspended"
    obj["status"] = {"jobStatus": {"jobId": obj["metadata"]["labels"][f"{P}/job-id"], "state": "SUSPENDED"}}
    obj["metadata"]["annotations"] = {f"{P}/stepped-down": "heartbeat not renewed for 15s"}
    agent = FencingAgent("member1", policy, api, CheckpointStorage(), events=Events())
    try:
        problem = asyncio.run(agent.executors.resume(read_copy(obj, policy)))
    finally:
        agent.close()
    return problem, api.patched, told


def test_the_fencing_agents_resume_is_held_rather_than_rewound(tmp_path: Path) -> None:
    """A stepped-down 2.3 copy on a 1.20 member: the agent's resume looks up its newest checkpoint as
    a restore does, and chk-8 (format 6) does not load on 1.20. Before, it resumed from chk-5 in
    silence (the Event said only "skipped"); now it stays stopped with the restore's hold, and where
    the policy allows older state it resumes from chk-5 with a Warning Event of what it left behind."""
    obj, job_dir = mixed(tmp_path)
    problem, patched, told = resumed(obj, RestorePolicy())
    assert patched == [], patched  # not resumed: no initialSavepointPath chk-5
    assert problem is not None and problem.startswith(
        "resume waits, held rather than rewound: the newest snapshot, chk-8, loads if you run Flink 2.1+; "
        "restoring the older chk-5 (checkpoint id 5) would leave 3 newer snapshots behind (chk-8, chk-7, "
    ), problem
    assert [(e.type, e.reason) for e in told] == [("Warning", "ResumeHeld")]
    assert f"To restore the newest: run Flink 2.1+, then spec.job.initialSavepointPath {job_dir}/chk-8" in (
        told[0].note
    )

    problem, patched, told = resumed(mixed(tmp_path / "again")[0], older())
    assert problem is None
    job_dir = f"{url_of(tmp_path / 'again' / 'new')}/ck/{tree('2.3.0-hashmap-files').job_id}"
    assert patched[-1]["spec"]["job"]["initialSavepointPath"] == f"{job_dir}/chk-5"
    assert [(e.type, e.reason) for e in told] == [("Warning", "Resumed")]
    assert (
        "; rewound: restored the older chk-5 (checkpoint id 5), leaving 3 newer snapshots behind (chk-8, "
        "chk-7, "
    ) in told[0].note
    assert "3 checkpoint ids newer, about 6 s at execution.checkpointing.interval 2 s" in told[0].note


def test_the_fencing_agents_resume_of_an_unclaimed_changelog_job_is_held(tmp_path: Path) -> None:
    """Its changelog checkpoints do not load in NO_CLAIM: the resume holds (it would have started from
    the canonical savepoint, five checkpoint ids older); in CLAIM it resumes from its newest."""
    each = tree("2.3.0-changelog")
    obj = deployment(each, tmp_path, **INTERVAL)
    problem, patched, told = resumed(obj, RestorePolicy())
    assert patched == [] and problem is not None
    assert "held rather than rewound: the newest snapshot, chk-9, loads if you set" in problem, problem
    obj = deployment(each, tmp_path, **{"execution.savepoint-restore-mode": "CLAIM"})
    problem, patched, told = resumed(obj, RestorePolicy())
    assert problem is None
    assert patched[-1]["spec"]["job"]["initialSavepointPath"] == f"{url_of(tmp_path)}/ck/{each.job_id}/chk-9"
    assert [(e.type, e.reason) for e in told] == [("Normal", "Resumed")]
    assert "rewound" not in told[0].note
