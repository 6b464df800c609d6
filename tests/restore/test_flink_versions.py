"""The restoring side's Flink (issue 36 item 3): a snapshot the target's Flink cannot load is passed
over for the newest one it can, or the job is held with the reason; never started to crash-loop.

The table (``common/flink_reads.py``) and its judgement, pure; then real ``_metadata`` written by Flink
2.3.0 and 1.20.5 (../shared/data/flink-real, tests/fixtures/flink) through the served webhook (gunicorn,
TLS) and the member handler, for targets that say ``v1_19``, ``v1_20`` and ``v2_3``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.flinktrees import materialize, tree
from tests.support.objects import apply, decode_patch, flink_deployment, review
from tests.support.server import admitting
from webhook.common.admission import parse_review
from webhook.common.flink import FlinkResource
from webhook.common.flink_reads import (
    FLINK_READS,
    HANDLE_NAMES,
    HandleMet,
    Target,
    cannot_read,
    is_target_problem,
    target_of,
)
from webhook.member.handler import MemberHandler
from webhook.policy.restore import (
    Fallback,
    NewerMetadata,
    OnUnloadable,
    PolicyError,
    RestorePolicy,
    Verify,
    policy_from_dict,
)
from webhook.restore.checks import judge
from webhook.restore.decide import restoring_flink
from webhook.restore.metadata import Metadata, read_metadata

P = "flink-failover.io"
JOB_2_3 = "61056cde07604699176df1284c1c5ede"  # ck-2.3.0: chk-8, chk-9, chk-11 (format 6)
JOB_1_20 = "b45bd4e20f28087eee7d73ebe0a0b884"  # ck-1.20.5: chk-8, chk-9, chk-11 (format 4)
JOB = "0123456789abcdef0123456789abcdef"  # the job the trees below are laid out for


def target(version: str, image: str = "", versions: tuple[tuple[str, str], ...] = ()) -> Target:
    return target_of(version, image, versions)


# --- the table ----------------------------------------------------------------------------------------


def test_the_table_holds_what_each_flink_dist_registers_and_knows() -> None:
    """As read from each minor's newest patch release (docs/flink.md "Which Flink reads what")."""
    formats = {v: max(r.formats) for v, r in FLINK_READS.items()}
    handles = {v: r.newest_handle for v, r in FLINK_READS.items()}
    assert formats == {
        "v1_13": 3, "v1_14": 3, "v1_15": 3, "v1_16": 4, "v1_17": 4, "v1_18": 4, "v1_19": 4, "v1_20": 4,
        "v2_0": 5, "v2_1": 6, "v2_2": 6, "v2_3": 6,
    }  # fmt: skip
    assert handles == {
        "v1_13": 7, "v1_14": 10, "v1_15": 12, "v1_16": 14, "v1_17": 14, "v1_18": 14, "v1_19": 14,
        "v1_20": 17, "v2_0": 17, "v2_1": 17, "v2_2": 17, "v2_3": 17,
    }  # fmt: skip
    assert all(min(r.formats) == 2 for r in FLINK_READS.values())  # format 1: no Flink here reads it
    assert set(HANDLE_NAMES) == set(range(1, 18))


@pytest.mark.shared
def test_every_flink_version_the_operator_spells_is_in_the_table() -> None:
    from tests.support.repo import shared_data_dir

    crd = shared_data_dir() / "crds/flink-operator-1.15.0/flinkdeployments.flink.apache.org-v1.yml"
    doc = yaml.safe_load(crd.read_text())
    props = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    spelled = props["flinkVersion"]["enum"]
    assert "v1_20" in spelled and set(spelled) - {"v1_13", "v1_14"} <= set(FLINK_READS)


def test_flink_1_20_refuses_formats_5_and_6_and_flink_1_19_handle_15() -> None:
    """The two refusals checked with the real jars (issue 36), told versions first."""
    for version in (5, 6):
        why = cannot_read(target("v1_20"), version)
        assert why.startswith(
            f"Flink 1.20 (spec.flinkVersion v1_20) cannot load it: format version {version} ("
        )
        assert why.endswith("; 1.20 reads up to 4)") and is_target_problem(why)
    assert "(Flink 2.0+ reads it;" in cannot_read(target("v1_20"), 5)
    assert "(Flink 2.1+ reads it;" in cannot_read(target("v2_0"), 6)
    assert cannot_read(target("v1_20"), 4) == ""
    where = "operator 2's state (subtask 0, managed keyed state)"
    merged = (HandleMet(11, "operator 1's state"), HandleMet(15, where))
    assert cannot_read(target("v1_19"), 4, merged) == (
        "Flink 1.19 (spec.flinkVersion v1_19) cannot load it: state handle type 15, SegmentFileStateHandle "
        f"(Flink 1.20+ reads it; 1.19 knows up to 14), in {where}"
    )
    assert cannot_read(target("v1_20"), 4, merged) == ""
    assert cannot_read(target("v1_15"), 4) != "" and cannot_read(target("v1_16"), 4) == ""


def test_an_unknown_target_judges_nothing_and_says_why() -> None:
    unknown = target("")
    assert not unknown.known and "spec.flinkVersion is not set" in unknown.unknown
    assert cannot_read(unknown, 6, (HandleMet(17, "x"),)) == ""
    future = target("v9_0")
    assert not future.known and "'v9_0' is not a version this release knows" in future.unknown
    assert cannot_read(future, 6) == ""


def test_the_image_mapping_counts_beside_spec_flink_version_the_stricter_wins() -> None:
    versions = (("*/flink:1.19*", "v1_19"), ("*/flink:*", "v2_3"), ("flink:1.19*", "v1_19"))
    by_image = target("", "docker.io/library/flink:1.19.3-java17", versions)
    assert [r.reads.version for r in by_image.readers] == ["v1_19"]  # the first pattern that matches
    assert "policy flinkVersions '*/flink:1.19*'" in by_image.readers[0].source
    both = target("v2_3", "docker.io/library/flink:1.19.3", versions)
    assert cannot_read(both, 6).startswith("Flink 1.19 (image docker.io/library/flink:1.19.3 (policy ")
    assert cannot_read(target("v2_3", "docker.io/library/flink:2.3.0", versions), 6) == ""
    unmatched = target("", "quay.io/x/other:1", versions)
    assert not unmatched.known and "no policy flinkVersions pattern matches the image" in unmatched.unknown


def test_a_session_job_is_restored_by_its_session_clusters_flink() -> None:
    job = FlinkResource.from_object(flink_deployment(kind="FlinkSessionJob"))
    cluster = FlinkResource.from_object(flink_deployment(name="session"))
    assert job.flink_version == "" and cluster.flink_version == "v1_20" and cluster.image == "flink:1.20"
    found = restoring_flink(job, cluster, RestorePolicy())
    assert [r.reads.version for r in found.readers] == ["v1_20"]
    assert found.readers[0].source == (
        f"session cluster FlinkDeployment {cluster.namespace}/session spec.flinkVersion v1_20"
    )
    assert not restoring_flink(job, None, RestorePolicy()).known


def test_a_blue_green_deployment_is_restored_by_its_templates_flink() -> None:
    obj = flink_deployment()
    spec = obj["spec"]
    obj = {
        **obj,
        "kind": "FlinkBlueGreenDeployment",
        "spec": {"template": {"spec": {**spec, "flinkVersion": "v1_19"}}},
    }
    assert FlinkResource.from_object(obj).flink_version == "v1_19"


def test_the_policy_field_flink_versions() -> None:
    policy = policy_from_dict({"flinkVersions": {"*/flink:1.19*": "v1_19", "*": "v2_3"}})
    assert policy.flink_versions == (("*/flink:1.19*", "v1_19"), ("*", "v2_3"))
    assert policy_from_dict({}).flink_versions == ()
    with pytest.raises(PolicyError, match=r"flinkVersions: \*: '1.20' is not one of v1_13, "):
        policy_from_dict({"flinkVersions": {"*": "1.20"}})
    with pytest.raises(PolicyError, match="must map an image pattern"):
        policy_from_dict({"flinkVersions": ["v1_20"]})


def test_judge_passes_over_what_the_target_cannot_load_newer_formats_too() -> None:
    read = read_metadata(tree("2.3.0-rocksdb-file-merging").folder.joinpath(
        "ck/79f52777759cd33ac21cc1de172a3e32/chk-8/_metadata").read_bytes())  # fmt: skip
    assert isinstance(read, Metadata) and read.version == 6
    assert [h.code for h in read.handles] == [17, 16, 11, 15]  # each once, in the order met
    assert judge(read, 8, NewerMetadata.TRUST, target("v2_3")).problem == ""
    assert is_target_problem(judge(read, 8, NewerMetadata.TRUST, target("v1_20")).problem)
    newer = read_metadata(read_bytes_with_version(7))
    assert judge(newer, None, NewerMetadata.TRUST, target("")).problem == ""  # trusted, unjudged
    assert (
        "cannot load it: format version 7 (no Flink this release knows reads it; 2.3 reads up to 6)"
        in judge(newer, None, NewerMetadata.TRUST, target("v2_3")).problem
    )


def read_bytes_with_version(version: int) -> bytes:
    from tests.support.objects import flink_metadata

    return flink_metadata(3, version=4)[:4] + version.to_bytes(4, "big") + flink_metadata(3)[8:]


# --- real _metadata through the served webhook ----------------------------------------------------------


def lay(shared: Path, root: Path, picks: dict[int, str]) -> Path:
    """A checkpoint directory whose job ``JOB`` holds ``chk-N`` copied from the real tree of the Flink
    release ``picks[N]`` names ("2.3.0", "1.20.5"); the ids match (each _metadata says its N)."""
    ck = root / "ck"
    for n, release in picks.items():
        job = JOB_2_3 if release == "2.3.0" else JOB_1_20
        shutil.copytree(shared / f"flink-real/ck-{release}/{job}/chk-{n}", ck / JOB / f"chk-{n}")
    return ck


def obj_for(ck: Path, version: str, sp: Path | None = None, image: str = "flink:1.20") -> dict[str, Any]:
    obj = flink_deployment(
        checkpoint_dir=str(ck),
        savepoint_dir=str(sp) if sp is not None else None,
        labels={f"{P}/failover": "true", f"{P}/job-id": JOB},
    )
    obj["spec"]["flinkVersion"] = version
    obj["spec"]["image"] = image
    return obj


def restored(response: dict[str, Any], obj: dict[str, Any]) -> tuple[str, str]:
    """(initialSavepointPath, spec.job.state) after the answer's patch."""
    assert response["allowed"], response
    job = apply(obj, decode_patch(response))["spec"]["job"]
    return str(job.get("initialSavepointPath", "")), str(job.get("state", ""))


def answered(policy: RestorePolicy, obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The member handler's answer in process, and its audit line's reason: every reason in full (the
    answer's warnings are cut short for kubectl)."""
    handler = MemberHandler.from_policy(policy)
    try:
        out = handler(parse_review(review(obj)))
        return out.to_review()["response"], out.audit.reason
    finally:
        handler.close()


def audited(policy: RestorePolicy, obj: dict[str, Any]) -> str:
    return answered(policy, obj)[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The real server (gunicorn, TLS) with a policy mapping flink:1.19 images to v1_19."""
    policy = json.dumps({"flinkVersions": {"flink:1.19*": "v1_19"}})
    with admitting(tmp_path_factory.mktemp("served"), policy) as admit:
        yield admit


@pytest.mark.shared
def test_a_v1_20_target_with_only_a_2_3_checkpoint_is_held_with_the_reason(
    served: Any, shared_data: Path, tmp_path: Path
) -> None:
    ck = lay(shared_data, tmp_path, {11: "2.3.0", 9: "2.3.0"})
    sp = tmp_path / "sp"
    shutil.copytree(shared_data / "flink-real/sp-2.3.0", sp)
    savepoint = sp / f"savepoint-{JOB[:6]}-8cbdca04dfca"
    (sp / "savepoint-61056c-8cbdca04dfca").rename(savepoint)
    obj = obj_for(ck, "v1_20", sp)
    response = served(obj)
    # Held: not started empty (onMissingState: allow would), nor from what would crash-loop it.
    assert restored(response, obj) == ("", "suspended")
    assert response["warnings"][0].startswith(
        "job held suspended: the restoring Flink cannot load any snapshot left: chk-11: Flink 1.20 "
        "(spec.flinkVersion v1_20) cannot load it: format version 6 (Flink 2.1+ reads it; 1.20 reads up "
        "to 4); no restorable checkpoint or savepoint: "
    )
    # Even where the policy lets a job without state start empty: its state exists, a newer Flink reads it.
    allowing, said = answered(RestorePolicy(on_missing_state=Fallback.ALLOW), obj)
    assert restored(allowing, obj) == ("", "suspended")
    assert said.startswith("the restoring Flink cannot load any snapshot left: chk-11: Flink 1.20")
    for skipped in ("chk-9", f"savepoint {savepoint}"):
        assert (
            f"skipped {skipped}: Flink 1.20 (spec.flinkVersion v1_20) cannot load it: format version 6"
            in said
        )


@pytest.mark.shared
def test_a_v1_20_target_is_held_rather_than_rewound_below_a_2_3_checkpoint(
    served: Any, shared_data: Path, tmp_path: Path
) -> None:
    """A 2.x job failing over to a 1.20 member: its newest checkpoint is one 1.20 cannot load, and the
    1.20 one below it is older state. Held, naming what loads the newest (issue 46: no silent rewind)."""
    ck = lay(shared_data, tmp_path, {11: "2.3.0", 9: "1.20.5"})
    obj = obj_for(ck, "v1_20")
    response = served(obj)
    assert restored(response, obj) == ("", "suspended")
    assert response["warnings"][0].startswith(
        "job held suspended: held rather than rewound: the newest snapshot, chk-11, loads if you run Flink "
        "2.1+; restoring the older chk-9 (checkpoint id 9) would leave 1 newer snapshot behind (chk-11; 2 "
        "checkpoint ids newer) (policy onUnl"
    )
    said = audited(RestorePolicy(), obj)
    assert (
        "(policy onUnloadable: hold). To restore the newest: run Flink 2.1+, "
        f"then spec.job.initialSavepointPath {ck}/{JOB}/chk-11; to restore the older: "
        f"spec.job.initialSavepointPath {ck}/{JOB}/chk-9. chk-11: Flink 1.20 (spec.flinkVersion v1_20) "
        "cannot load it: format version 6 (Flink 2.1+ reads it; 1.20 reads up to 4)"
    ) in said


@pytest.mark.shared
def test_a_v1_20_target_restores_the_1_20_checkpoint_below_a_2_3_one_where_the_policy_allows(
    shared_data: Path, tmp_path: Path
) -> None:
    ck = lay(shared_data, tmp_path, {11: "2.3.0", 9: "1.20.5"})
    obj = obj_for(ck, "v1_20")
    response, _ = answered(RestorePolicy(on_unloadable=OnUnloadable.OLDER), obj)
    assert restored(response, obj) == (f"{ck}/{JOB}/chk-9", "")
    assert response["warnings"][0] == f"restoring from checkpoint {ck}/{JOB}/chk-9 (checkpoint id 9)"
    assert response["warnings"][1].startswith(
        "rewound: restored the older chk-9 (checkpoint id 9), leaving 1 newer snapshot behind (chk-11; 2 "
        "checkpoint ids newer) that the restoring Flink cannot load (the newest loads if you run Flink 2.1+; "
    )
    assert response["warnings"][2] == (
        "skipped chk-11: Flink 1.20 (spec.flinkVersion v1_20) cannot load it: format version 6 (Flink 2.1+ "
        "reads it; 1.20 reads up to 4)"
    )


@pytest.mark.shared
def test_a_v2_3_target_restores_the_2_3_checkpoint(served: Any, shared_data: Path, tmp_path: Path) -> None:
    ck = lay(shared_data, tmp_path, {11: "2.3.0", 9: "1.20.5"})
    obj = obj_for(ck, "v2_3", image="flink:2.3.0")
    response = served(obj)
    assert restored(response, obj) == (f"{ck}/{JOB}/chk-11", "")
    assert response["warnings"] == [f"restoring from checkpoint {ck}/{JOB}/chk-11 (checkpoint id 11)"]


@pytest.mark.shared
def test_an_image_the_policy_maps_to_v1_19_holds_what_only_1_20_reads(served: Any, tmp_path: Path) -> None:
    """spec.flinkVersion says v1_20 but the image runs 1.19 (policy flinkVersions): the stricter counts.
    Real Flink 1.20.5's file-merging checkpoints hold handle types 15-17, which 1.19 does not know."""
    each = tree("1.20.5-rocksdb-file-merging")
    materialize(each, tmp_path)
    obj = flink_deployment(
        checkpoint_dir=f"file://{tmp_path}/ck", labels={f"{P}/failover": "true", f"{P}/job-id": each.job_id}
    )
    obj["spec"]["flinkVersion"] = "v1_20"
    obj["spec"]["image"] = "flink:1.19.3"
    response = served(obj)
    assert restored(response, obj) == ("", "suspended")
    top = each.checkpoints()[0]
    assert response["warnings"][0].startswith(
        f"job held suspended: the restoring Flink cannot load any snapshot left: chk-{top}: Flink 1.19 "
        "(image flink:1.19.3 (policy flinkVersions 'flink:1.19*')) cannot load it: state handle type 17, "
        "FileMergingOperatorStreamStateHandle (Flink 1.20+ re"
    )
    said = audited(RestorePolicy(flink_versions=(("flink:1.19*", "v1_19"),)), obj)
    assert (
        "FileMergingOperatorStreamStateHandle (Flink 1.20+ reads it; 1.19 knows up to 14), in operator "
        in said
    )
    obj["spec"]["image"] = "flink:1.20.5"
    assert restored(served(obj), obj) == (f"file://{tmp_path}/ck/{each.job_id}/chk-{top}", "")


@pytest.mark.shared
def test_no_flink_version_restores_as_before_with_a_warning(
    served: Any, shared_data: Path, tmp_path: Path
) -> None:
    ck = lay(shared_data, tmp_path, {11: "2.3.0", 9: "1.20.5"})
    obj = obj_for(ck, "v1_20")
    del obj["spec"]["flinkVersion"]
    response = served(obj)
    assert restored(response, obj) == (f"{ck}/{JOB}/chk-11", "")
    assert response["warnings"][1].startswith(
        "the restoring Flink's version is not known (spec.flinkVersion is not set; no policy flinkVersions "
        "pattern matches the image flink:1.20): not checked that it can load checkpoint "
    )


@pytest.mark.shared
def test_a_header_check_judges_the_format_version(shared_data: Path, tmp_path: Path) -> None:
    ck = lay(shared_data, tmp_path, {11: "2.3.0", 9: "1.20.5"})
    obj = obj_for(ck, "v1_20")
    assert audited(RestorePolicy(verify=Verify.HEADER), obj).startswith(
        "held rather than rewound: the newest snapshot, chk-11, loads if you run Flink 2.1+; "
    )
    said = audited(RestorePolicy(verify=Verify.HEADER, on_unloadable=OnUnloadable.OLDER), obj)
    assert said.startswith(f"restoring from checkpoint {ck}/{JOB}/chk-9; rewound: ")
    assert said.endswith(
        "; skipped chk-11: Flink 1.20 (spec.flinkVersion v1_20) "
        "cannot load it: format version 6 (Flink 2.1+ reads it; 1.20 reads up to 4)"
    )


@pytest.mark.shared
def test_the_fencing_agents_resume_passes_over_what_its_flink_cannot_load(
    shared_data: Path, tmp_path: Path
) -> None:
    """A stepped-down copy resumes from its newest checkpoint its own Flink loads, as a restore does."""
    from tests.support.objects import running_deployment
    from webhook.fencing.copies import read_copy
    from webhook.fencing.starts import resume_query
    from webhook.restore.storage.backends import Deadline
    from webhook.restore.storage.search import CheckpointStorage

    ck = lay(shared_data, tmp_path, {11: "2.3.0", 9: "1.20.5"})
    obj = running_deployment(JOB, checkpoint_dir=str(ck))
    obj["spec"]["flinkVersion"] = "v1_20"
    policy = RestorePolicy()
    query = resume_query(read_copy(obj, policy), policy)
    assert query is not None
    found = CheckpointStorage().snapshots(query, Deadline(30))
    assert found.checkpoint is not None and found.checkpoint.path.name == "chk-9"
    assert found.rejected[0].startswith("chk-11: Flink 1.20 (spec.flinkVersion v1_20) cannot load it:")
