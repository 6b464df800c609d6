"""Restore from the job's whole history (issue 23): its own savepoints found in storage, ordered with
its checkpoints by the checkpoint id Flink wrote, and the state it was started from as its floor.

Each case runs on local files and on moto's S3 server (through s3fs), through the real handler.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import s3fs

from tests.support.objects import (
    JOB_ID,
    OTHER_JOB_ID,
    apply,
    decode_patch,
    flink_deployment,
    flink_metadata,
    flink_version,
    review,
)
from tests.support.s3 import moto_server, s3_options
from webhook.common.admission import parse_review
from webhook.common.flink import FlinkResource
from webhook.member.handler import MemberHandler
from webhook.policy.restore import Prefer, RestorePolicy
from webhook.restore.decide import decide_restore
from webhook.restore.metadata import metadata_checkpoint_id
from webhook.restore.outcome import RestoreDecision
from webhook.restore.storage.backends import Deadline
from webhook.restore.storage.search import CheckpointStorage

BUCKET = "history"
FAILOVER = "flink-failover.io/failover"
JOB_LABEL = "flink-failover.io/job-id"
STARTED_FROM = "flink-failover.io/started-from"
# Same first 6 hex as JOB_ID, another job: its savepoints carry the same name prefix.
TWIN_JOB_ID = JOB_ID[:6] + "ffffffffffffffffffffffffff"
PREDECESSOR = "aaaaaa00000000000000000000000001"
HOUR_AGO = 1_700_000_000.0
MINUTE_AGO = HOUR_AGO + 3540


class Store:
    """One storage, local or S3, written the way Flink lays it out."""

    def __init__(self, root: str, put: Callable[[str, bytes, float | None], None], policy: RestorePolicy):
        self.root = root
        self._put = put
        self.policy = policy
        self.local = root.startswith("/")

    def uri(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def put(self, rel: str, data: bytes, mtime: float | None = None) -> None:
        self._put(rel, data, mtime)

    def checkpoint(self, job_id: str, n: int, mtime: float | None = None, data: bytes | None = None) -> str:
        self.put(f"ck/{job_id}/chk-{n}/state", b"x")
        self.put(f"ck/{job_id}/chk-{n}/_metadata", flink_metadata(n) if data is None else data, mtime)
        return self.uri(f"ck/{job_id}/chk-{n}")

    def savepoint(
        self,
        job_id: str,
        suffix: str,
        checkpoint_id: int,
        mtime: float | None = None,
        data: bytes | None = None,
    ) -> str:
        name = f"savepoint-{job_id[:6]}-{suffix}"
        self.put(f"sp/{name}/state", b"x")
        if data is not None or checkpoint_id >= 0:
            self.put(f"sp/{name}/_metadata", flink_metadata(checkpoint_id) if data is None else data, mtime)
        return self.uri(f"sp/{name}")

    def deployment(self, job_id: str = JOB_ID, **annotations: str) -> dict[str, Any]:
        return flink_deployment(
            checkpoint_dir=self.uri("ck"),
            savepoint_dir=self.uri("sp"),
            labels={FAILOVER: "true", JOB_LABEL: job_id},
            annotations=dict(annotations) or None,
        )


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, s3fs.S3FileSystem]]:
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))
        fs.mkdir(BUCKET)
        yield endpoint, fs


def local_store(tmp_path: Path) -> Store:
    root = tmp_path / "state"

    def put_local(rel: str, data: bytes, mtime: float | None) -> None:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if mtime is not None:
            os.utime(target, (mtime, mtime))

    (root / "ck").mkdir(parents=True)
    return Store(str(root), put_local, RestorePolicy())


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "local":
        return local_store(tmp_path)
    endpoint, fs = request.getfixturevalue("s3")
    prefix = f"{BUCKET}/{tmp_path.name}"

    def put_s3(rel: str, data: bytes, mtime: float | None) -> None:
        fs.pipe(f"{prefix}/{rel}", data)  # S3 sets the time itself: tests that need times run locally

    put_s3("ck/.keep", b"", None)
    return Store(f"s3://{prefix}", put_s3, RestorePolicy(storage_options={"s3": s3_options(endpoint)}))


def answer(policy: RestorePolicy, obj: dict[str, Any]) -> dict[str, Any]:
    handler = MemberHandler.from_policy(policy)
    try:
        return handler(parse_review(review(obj))).to_review()["response"]
    finally:
        handler.close()


def decide(policy: RestorePolicy, obj: dict[str, Any]) -> RestoreDecision:
    storage = CheckpointStorage(policy.storage_options)
    resource = FlinkResource.from_object(obj)
    return decide_restore("CREATE", resource, None, policy, lambda q: storage.snapshots(q, Deadline(10)))


def restored_path(resp: dict[str, Any], obj: dict[str, Any]) -> str | None:
    assert resp["allowed"] is True, resp
    patched = apply(obj, decode_patch(resp))
    path = patched["spec"]["job"].get("initialSavepointPath")
    return str(path) if path is not None else None


def held(resp: dict[str, Any], obj: dict[str, Any]) -> bool:
    return bool(apply(obj, decode_patch(resp))["spec"]["job"].get("state") == "suspended")


# --- savepoints found in storage -----------------------------------------------------------------------


def test_a_job_without_checkpoints_restores_its_own_newest_savepoint(store: Store) -> None:
    store.savepoint(JOB_ID, "000000000001", 3)
    newest = store.savepoint(JOB_ID, "ffffffffffff", 7)
    store.savepoint(JOB_ID, "888888888888", 5)
    obj = store.deployment()
    resp = answer(store.policy, obj)
    assert restored_path(resp, obj) == newest
    assert any("checkpoint id 7" in w for w in resp["warnings"])


def test_a_newer_savepoint_wins_over_an_older_checkpoint_under_prefer_newest(store: Store) -> None:
    store.checkpoint(JOB_ID, 5, mtime=HOUR_AGO)
    savepoint = store.savepoint(JOB_ID, "0123456789ab", 6, mtime=MINUTE_AGO)
    obj = store.deployment()
    assert restored_path(answer(store.policy, obj), obj) == savepoint


def test_a_savepoint_older_than_the_newest_checkpoint_loses_by_id(store: Store) -> None:
    checkpoint = store.checkpoint(JOB_ID, 11)
    store.savepoint(JOB_ID, "0123456789ab", 10)
    obj = store.deployment()
    assert restored_path(answer(store.policy, obj), obj) == checkpoint


@pytest.mark.parametrize(("prefer", "expected"), [(Prefer.CHECKPOINT, "ck"), (Prefer.SAVEPOINT, "sp")])
def test_prefer_checkpoint_or_savepoint_still_decides(store: Store, prefer: Prefer, expected: str) -> None:
    store.checkpoint(JOB_ID, 4)
    store.savepoint(JOB_ID, "0123456789ab", 9)
    obj = store.deployment()
    policy = RestorePolicy(prefer=prefer, storage_options=store.policy.storage_options)
    path = restored_path(answer(policy, obj), obj)
    assert path is not None and path.startswith(store.uri(expected))


def test_another_jobs_savepoint_and_an_incomplete_one_are_never_chosen(store: Store) -> None:
    store.savepoint(OTHER_JOB_ID, "0123456789ab", 50)  # another job's prefix
    store.savepoint(JOB_ID, "111111111111", -1)  # no _metadata: in progress or aborted
    store.savepoint(JOB_ID, "222222222222", 0, data=flink_metadata(40)[:6])  # truncated
    store.savepoint(JOB_ID, "333333333333", 0, data=b"PK\x03\x04 not flink at all")  # foreign
    store.put("sp/savepoint-3c653d-not-hex-name/_metadata", flink_metadata(60))  # not Flink's naming
    checkpoint = store.checkpoint(JOB_ID, 2)
    obj = store.deployment()
    resp = answer(store.policy, obj)
    assert restored_path(resp, obj) == checkpoint
    skipped = " ".join(resp["warnings"])
    assert "savepoint-3c653d-222222222222: _metadata is truncated" in skipped
    assert "savepoint-3c653d-333333333333: _metadata is not a Flink metadata file" in skipped


def test_nothing_restorable_in_the_whole_history_is_held(store: Store) -> None:
    store.savepoint(OTHER_JOB_ID, "0123456789ab", 50)
    store.savepoint(JOB_ID, "111111111111", -1)
    obj = store.deployment()
    resp = answer(store.policy, obj)
    assert held(resp, obj) and restored_path(resp, obj) is None
    assert "no restorable checkpoint or savepoint" in " ".join(resp["warnings"])
    decision = decide(store.policy, obj)
    assert f"no complete savepoint-{JOB_ID[:6]}-* of this job in {store.uri('sp')}" in decision.reason
    assert "the snapshot it started from is not known" in decision.reason


def test_a_prefix_shared_with_another_job_in_the_checkpoint_directory_is_never_chosen_by_name(
    store: Store,
) -> None:
    """Two jobs whose jobIds start alike write savepoints no name can tell apart: when the checkpoint
    directory shows the other one, savepoints are not chosen by their name at all."""
    checkpoint = store.checkpoint(JOB_ID, 3)
    store.checkpoint(TWIN_JOB_ID, 90)
    store.savepoint(TWIN_JOB_ID, "0123456789ab", 91)  # the twin's, named like ours
    obj = store.deployment()
    resp = answer(store.policy, obj)
    assert restored_path(resp, obj) == checkpoint
    assert any(f"also that of job {TWIN_JOB_ID}" in w for w in resp["warnings"])


def test_the_reported_savepoint_still_counts_and_is_not_read_twice(store: Store) -> None:
    reported = store.savepoint(JOB_ID, "0123456789ab", 8)
    store.checkpoint(JOB_ID, 7)
    obj = store.deployment(**{"flink-failover.io/last-savepoint": reported})
    resp = answer(store.policy, obj)
    assert restored_path(resp, obj) == reported


# --- the state the job started from ---------------------------------------------------------------------


def test_a_job_that_completed_nothing_restores_the_state_it_started_from(store: Store) -> None:
    start = store.checkpoint(PREDECESSOR, 11)
    store.checkpoint(PREDECESSOR, 12)  # the predecessor went on after it: never the floor
    obj = store.deployment(**{STARTED_FROM: start})
    resp = answer(store.policy, obj)
    assert restored_path(resp, obj) == start
    assert any("restoring from the state the old job started from" in w for w in resp["warnings"])
    lineage = decide(store.policy, obj).lineage
    assert lineage == (
        f"job {JOB_ID} completed nothing restorable of its own; it was started from {start} "
        f"(a checkpoint of job {PREDECESSOR})"
    )
    patched = apply(obj, decode_patch(resp))
    assert patched["metadata"]["annotations"]["flink-failover.io/restored-from"] == start


def test_a_savepoint_floor_names_the_job_by_the_prefix_its_name_carries(store: Store) -> None:
    start = store.savepoint(PREDECESSOR, "0123456789ab", 11)
    obj = store.deployment(**{STARTED_FROM: start})
    assert restored_path(answer(store.policy, obj), obj) == start
    assert decide(store.policy, obj).lineage.endswith(f"(a savepoint of job {PREDECESSOR[:6]}...)")


def test_the_floor_is_not_used_when_the_job_has_state_of_its_own(store: Store) -> None:
    start = store.checkpoint(PREDECESSOR, 11)
    own = store.savepoint(JOB_ID, "0123456789ab", 12)
    obj = store.deployment(**{STARTED_FROM: start})
    assert restored_path(answer(store.policy, obj), obj) == own


def test_a_floor_outside_the_jobs_directories_or_incomplete_is_never_restored(store: Store) -> None:
    elsewhere = "s3://elsewhere/ck/x/chk-1" if not store.local else "/elsewhere/ck/x/chk-1"
    obj = store.deployment(**{STARTED_FROM: elsewhere})
    resp = answer(store.policy, obj)
    assert held(resp, obj)
    assert any("ignored started-from: outside" in w for w in resp["warnings"])
    store.put(f"ck/{PREDECESSOR}/chk-4/state", b"x")  # no _metadata
    obj = store.deployment(**{STARTED_FROM: store.uri(f"ck/{PREDECESSOR}/chk-4")})
    resp = answer(store.policy, obj)
    assert held(resp, obj)


def test_consecutive_failovers_restore_what_the_job_that_never_checkpointed_started_from(
    store: Store,
) -> None:
    """A ran and checkpointed; B started from A's chk-11 and failed over before its first checkpoint;
    C restores chk-11 (what B started from), not A's later chk-12 or nothing."""
    a_chk = store.checkpoint(PREDECESSOR, 11)
    store.checkpoint(PREDECESSOR, 12, data=flink_metadata(12)[:5])  # torn write: never chosen
    b_job = "bbbbbb00000000000000000000000002"
    obj_c = store.deployment(b_job, **{STARTED_FROM: a_chk})
    resp = answer(store.policy, obj_c)
    assert restored_path(resp, obj_c) == a_chk


# --- newest by what Flink wrote -------------------------------------------------------------------------


def test_ids_decide_where_a_copy_reset_the_times(tmp_path: Path) -> None:
    store = local_store(tmp_path)  # S3 sets modification times itself
    store.checkpoint(JOB_ID, 9, mtime=MINUTE_AGO)  # copied last: the newest time
    savepoint = store.savepoint(JOB_ID, "0123456789ab", 10, mtime=HOUR_AGO)
    obj = store.deployment()
    assert restored_path(answer(store.policy, obj), obj) == savepoint


def test_times_decide_between_two_snapshots_of_one_id(tmp_path: Path) -> None:
    store = local_store(tmp_path)
    store.checkpoint(JOB_ID, 9, mtime=HOUR_AGO)
    savepoint = store.savepoint(JOB_ID, "0123456789ab", 9, mtime=MINUTE_AGO)  # a copy of chk-9
    obj = store.deployment()
    assert restored_path(answer(store.policy, obj), obj) == savepoint


def test_a_format_flink_no_longer_reads_is_never_restored(tmp_path: Path) -> None:
    store = local_store(tmp_path)
    version_one = bytes.fromhex("4960672d00000001") + b"old format without an id up front"
    checkpoint = store.checkpoint(JOB_ID, 9, mtime=HOUR_AGO)
    store.savepoint(JOB_ID, "0123456789ab", 0, mtime=MINUTE_AGO, data=version_one)
    obj = store.deployment()
    resp = answer(store.policy, obj)
    assert restored_path(resp, obj) == checkpoint
    assert "_metadata is in format version 1 (Flink 1.2 and older), which Flink no longer reads" in str(resp)


def test_metadata_checkpoint_id_reads_the_header() -> None:
    assert metadata_checkpoint_id(flink_metadata(11)) == 11
    assert metadata_checkpoint_id(flink_metadata(11, version=6)) == 11
    assert metadata_checkpoint_id(flink_metadata(11)[:12]) is None
    assert metadata_checkpoint_id(bytes.fromhex("4960672d00000001") + bytes(8)) is None
    assert metadata_checkpoint_id(b"\x00" * 16) is None


# --- real Flink trees (../shared/data/flink-real) -------------------------------------------------------

REAL = {"1.20.5": "b45bd4e20f28087eee7d73ebe0a0b884", "2.3.0": "61056cde07604699176df1284c1c5ede"}


def _copy_real(shared: Path, version: str, into: Path) -> tuple[Path, Path]:
    """``cp -r`` of a real tree: every modification time is now."""
    ck, sp = into / "ck", into / "sp"
    shutil.copytree(shared / "flink-real" / f"ck-{version}", ck)
    shutil.copytree(shared / "flink-real" / f"sp-{version}", sp)
    return ck, sp


@pytest.mark.parametrize("version", sorted(REAL))
def test_real_flink_trees_are_ordered_by_id_with_their_times_reset(
    shared_data: Path, tmp_path: Path, version: str
) -> None:
    job_id = REAL[version]
    ck, sp = _copy_real(shared_data, version, tmp_path)
    (savepoint,) = sp.iterdir()
    os.utime(savepoint / "_metadata", (MINUTE_AGO + 60, MINUTE_AGO + 60))  # the newest time of all
    for chk in (ck / job_id).iterdir():
        os.utime(chk / "_metadata", (HOUR_AGO, HOUR_AGO))
    obj = flink_deployment(
        checkpoint_dir=str(ck), savepoint_dir=str(sp), labels={FAILOVER: "true", JOB_LABEL: job_id}
    )
    obj["spec"]["flinkVersion"] = flink_version(version)  # the Flink that wrote it restores it
    resp = answer(RestorePolicy(), obj)
    assert restored_path(resp, obj) == str(ck / job_id / "chk-11")  # 11 > 10, whatever the times say
    shutil.rmtree(ck / job_id / "chk-11")
    resp = answer(RestorePolicy(), obj)
    assert restored_path(resp, obj) == str(savepoint)  # 10 > 9
    assert any("checkpoint id 10" in w for w in resp["warnings"])


@pytest.mark.parametrize("version", sorted(REAL))
def test_real_flink_trees_on_s3(shared_data: Path, s3: tuple[str, s3fs.S3FileSystem], version: str) -> None:
    endpoint, fs = s3
    job_id = REAL[version]
    prefix = f"{BUCKET}/real-{version}"
    fs.put(str(shared_data / "flink-real" / f"ck-{version}") + "/", f"{prefix}/ck/", recursive=True)
    fs.put(str(shared_data / "flink-real" / f"sp-{version}") + "/", f"{prefix}/sp/", recursive=True)
    obj = flink_deployment(
        checkpoint_dir=f"s3://{prefix}/ck",
        savepoint_dir=f"s3://{prefix}/sp",
        labels={FAILOVER: "true", JOB_LABEL: job_id},
    )
    obj["spec"]["flinkVersion"] = flink_version(version)
    policy = RestorePolicy(storage_options={"s3": s3_options(endpoint)})
    assert restored_path(answer(policy, obj), obj) == f"s3://{prefix}/ck/{job_id}/chk-11"
    fs.rm(f"{prefix}/ck/{job_id}/chk-11", recursive=True)
    (savepoint,) = (shared_data / "flink-real" / f"sp-{version}").iterdir()
    assert restored_path(answer(policy, obj), obj) == f"s3://{prefix}/sp/{savepoint.name}"
