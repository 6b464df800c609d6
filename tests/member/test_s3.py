"""Checkpoint resolution against a real S3 API (moto's server on loopback) through s3fs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import s3fs

from tests.support.objects import (
    FLINK_METADATA,
    JOB_ID,
    apply,
    decode_patch,
    flink_deployment,
    flink_metadata,
    review,
)
from tests.support.s3 import moto_server, s3_options
from webhook.common.admission import parse_review
from webhook.member.handler import MemberHandler
from webhook.policy.restore import RestorePolicy

BUCKET = "flink-state"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, s3fs.S3FileSystem]]:
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with moto_server(log) as endpoint:
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))
        fs.mkdir(BUCKET)
        yield endpoint, fs


def put_checkpoints(
    fs: s3fs.S3FileSystem, prefix: str, ids: list[int], without_metadata: tuple[int, ...] = ()
) -> None:
    for n in ids:
        fs.pipe(f"{BUCKET}/{prefix}/chk-{n}/state", b"x")
        if n not in without_metadata:
            fs.pipe(f"{BUCKET}/{prefix}/chk-{n}/_metadata", flink_metadata(n))


def answer(policy: RestorePolicy, obj: dict[str, Any]) -> dict[str, Any]:
    handler = MemberHandler.from_policy(policy)
    try:
        return handler(parse_review(review(obj))).to_review()["response"]
    finally:
        handler.close()


@pytest.mark.parametrize("scheme", ["s3", "s3a", "s3p"])
def test_newest_restorable_checkpoint_on_s3_keeps_the_scheme(s3: tuple[str, Any], scheme: str) -> None:
    endpoint, fs = s3
    put_checkpoints(fs, f"{scheme}/ckpt/{JOB_ID}", [2, 11, 12], without_metadata=(12,))
    policy = RestorePolicy(storage_options={"s3": s3_options(endpoint)})
    obj = flink_deployment(
        checkpoint_dir=f"{scheme}://{BUCKET}/{scheme}/ckpt",
        labels={"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB_ID},
    )
    resp = answer(policy, obj)
    patched = apply(obj, decode_patch(resp))
    assert (
        patched["spec"]["job"]["initialSavepointPath"] == f"{scheme}://{BUCKET}/{scheme}/ckpt/{JOB_ID}/chk-11"
    )


def test_new_checkpoints_are_seen_without_a_restart(s3: tuple[str, Any]) -> None:
    """s3fs caches listings by default; a stale listing would restore an old checkpoint."""
    endpoint, fs = s3
    put_checkpoints(fs, f"fresh/{JOB_ID}", [1])
    policy = RestorePolicy(storage_options={"s3": s3_options(endpoint)})
    handler = MemberHandler.from_policy(policy)
    obj = flink_deployment(checkpoint_dir=f"s3://{BUCKET}/fresh", labels={"flink-failover.io/job-id": JOB_ID})
    first = apply(obj, decode_patch(handler(parse_review(review(obj))).to_review()["response"]))
    put_checkpoints(fs, f"fresh/{JOB_ID}", [2])
    second = apply(obj, decode_patch(handler(parse_review(review(obj))).to_review()["response"]))
    handler.close()
    assert first["spec"]["job"]["initialSavepointPath"].endswith("chk-1")
    assert second["spec"]["job"]["initialSavepointPath"].endswith("chk-2")


def test_savepoint_annotation_on_s3(s3: tuple[str, Any]) -> None:
    endpoint, fs = s3
    sp = f"sp/savepoint-{JOB_ID[:6]}-0123456789ab"
    fs.pipe(f"{BUCKET}/{sp}/_metadata", FLINK_METADATA)
    obj = flink_deployment(
        checkpoint_dir=f"s3://{BUCKET}/none",
        savepoint_dir=f"s3://{BUCKET}/sp",
        labels={"flink-failover.io/failover": "true"},
        annotations={"flink-failover.io/last-savepoint": f"s3://{BUCKET}/{sp}"},
    )
    resp = answer(RestorePolicy(storage_options={"s3": s3_options(endpoint)}), obj)
    patched = apply(obj, decode_patch(resp))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"s3://{BUCKET}/{sp}"
    assert patched["spec"]["job"]["upgradeMode"] == "savepoint"


def test_missing_bucket_and_bad_credentials_are_storage_errors(s3: tuple[str, Any], tmp_path: Path) -> None:
    endpoint, _ = s3
    labels = {"flink-failover.io/job-id": JOB_ID}
    policy = RestorePolicy(storage_options={"s3": s3_options(endpoint)}, deadline_seconds=5)
    resp = answer(policy, flink_deployment(checkpoint_dir="s3://no-such-bucket/ckpt", labels=labels))
    # A missing bucket is a storage problem, not "no checkpoints": onStorageError (deny) applies.
    assert resp["allowed"] is False and "does not exist" in resp["status"]["message"]
    unreachable = replace(
        policy,
        storage_options={
            "s3": {
                **s3_options("http://127.0.0.1:9"),
                "config_kwargs": {
                    "connect_timeout": 0.5,
                    "read_timeout": 0.5,
                    "retries": {"max_attempts": 1},
                },
            }
        },
    )
    resp = answer(unreachable, flink_deployment(checkpoint_dir=f"s3://{BUCKET}/x", labels=labels))
    assert resp["allowed"] is False and "storage" in resp["status"]["message"]


@pytest.mark.parametrize("where", ["s3", "file"])
def test_one_listing_of_a_storage_reads_each_workloads_records_as_its_own_listing(
    s3: tuple[str, Any], tmp_path: Path, where: str
) -> None:
    """The fencing poll's one listing of ``<checkpoint-dir>/flink-failover`` (s3fs's ``find``, the local
    filesystem's walk) gives every workload the records its own folder's listing gives, times included;
    a workload without records has none, and a tree that does not exist yet is empty."""
    from webhook.common.paths import StoragePath
    from webhook.fencing.records import FencingStore, Workload
    from webhook.restore.storage.search import CheckpointStorage

    endpoint, _ = s3
    base = f"s3://{BUCKET}/tree-{tmp_path.name}" if where == "s3" else str(tmp_path / "ckpt")
    root = StoragePath.parse(base)
    store = FencingStore(CheckpointStorage({"s3": s3_options(endpoint)}), "member1")
    records = root.child("flink-failover")
    assert store.lanes.call(store.tree_call(records)) == {}
    workloads = [Workload("FlinkDeployment", "analytics", f"job-{i}") for i in range(3)]
    for i, workload in enumerate(workloads[:2]):
        folder = workload.folder(root)
        store.beat(folder, {"n": i})
        store.fence(folder, i + 1, {"n": i})
    store.ack(workloads[1].folder(root), 2, "stopped")
    store.clock(records)
    tree = store.lanes.call(store.tree_call(records))
    for workload in workloads:
        folder = workload.folder(root)
        own = store.list(folder).ownership
        listed = tree.get(folder.fs_path.rstrip("/"))
        assert (listed.ownership if listed is not None else type(own)()) == own
    assert tree[workloads[0].folder(root).fs_path].ownership.heartbeats
    assert not tree[workloads[1].folder(root).fs_path].ownership.heartbeats  # the ack dropped it
