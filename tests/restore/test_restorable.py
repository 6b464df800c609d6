"""Only what Flink can restore is restored: real Flink 1.20.5 and 2.3.0 trees (tests/fixtures/flink),
cut, emptied of a file, mislabelled, or grown, on the local filesystem and on S3 (moto), through the
member handler, the real server (gunicorn, TLS), ``flink-failover review`` and the fencing agent."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import s3fs

from tests.support.flinktrees import Tree, materialize, tree, trees, upload
from tests.support.objects import apply, decode_patch, flink_deployment, flink_version, review
from tests.support.repo import REPO
from tests.support.s3 import moto_server, s3_options
from tests.support.server import executable, generate_certs, serve
from webhook.common.admission import parse_review
from webhook.member.handler import MemberHandler
from webhook.policy.restore import NewerMetadata, RestorePolicy, Verify
from webhook.restore.metadata import Metadata, read_metadata

P = "flink-failover.io"
INCREMENTAL = ("1.20.5-rocksdb-incremental", "2.3.0-rocksdb-incremental")


def spelled(url: str) -> str:
    """A local root as the product spells paths (``file:///x``; Flink writes ``file:/x``)."""
    return "file://" + url.removeprefix("file:") if url.startswith("file:/") else url


def deployment(each: Tree, url: str) -> dict[str, Any]:
    """The object restoring ``each``, run by the Flink that wrote it (spec.flinkVersion), configured as
    its job was: a changelog job restores in CLAIM mode (tests/restore/test_changelog_claim.py: without)."""
    obj = flink_deployment(
        checkpoint_dir=f"{url}/ck",
        savepoint_dir=f"{url}/sp",
        labels={f"{P}/failover": "true", f"{P}/job-id": each.job_id},
    )
    obj["spec"]["flinkVersion"] = flink_version(each.flink)
    if "changelog" in each.name:
        obj["spec"]["flinkConfiguration"]["execution.state-recovery.claim-mode"] = "CLAIM"
    return obj


def answer(policy: RestorePolicy, obj: dict[str, Any]) -> dict[str, Any]:
    """The admission answer, with what the audit line says in full under ``told`` (an answer's
    warnings are cut short for kubectl; the audit line keeps every reason)."""
    handler = MemberHandler.from_policy(policy)
    try:
        answered = handler(parse_review(review(obj)))
        out: dict[str, Any] = answered.to_review()["response"]
        out["told"] = answered.audit.reason
        return out
    finally:
        handler.close()


def chosen(response: dict[str, Any], obj: dict[str, Any]) -> str:
    assert response["allowed"], response
    job = apply(obj, decode_patch(response))["spec"]["job"]
    return str(job.get("initialSavepointPath", ""))


def warnings(response: dict[str, Any]) -> str:
    return "\n".join([*response.get("warnings", []), response.get("told", "")])


def named_only_by(each: Tree, top: int) -> list[str]:
    """Files (tree-relative) the checkpoint ``top`` names that the one before it does not."""
    root = str(each.info["root"]) + "/"
    below = each.checkpoints()[1]

    def files(n: int) -> set[str]:
        found = read_metadata((each.folder / f"ck/{each.job_id}/chk-{n}/_metadata").read_bytes())
        assert isinstance(found, Metadata)
        return {
            f.path[len(root) :] if f.path.startswith(root) else f"ck/{each.job_id}/chk-{n}/{f.path}"
            for f in found.files
        }

    return sorted(files(top) - files(below))


@pytest.mark.parametrize("each", trees(), ids=lambda t: t.name)
def test_every_real_tree_restores_its_newest_checkpoint_checked_to_its_files(
    each: Tree, tmp_path: Path
) -> None:
    url = spelled(materialize(each, tmp_path))
    obj = deployment(each, url)
    response = answer(RestorePolicy(), obj)
    top = each.checkpoints()[0]
    assert chosen(response, obj) == f"{url}/ck/{each.job_id}/chk-{top}"
    assert "skipped" not in warnings(response)


@pytest.mark.parametrize("name", INCREMENTAL)
def test_a_newest_checkpoint_cut_short_is_skipped_naming_where_it_ends(name: str, tmp_path: Path) -> None:
    each = tree(name)
    url = spelled(materialize(each, tmp_path))
    top, below = each.checkpoints()[:2]
    meta = tmp_path / f"ck/{each.job_id}/chk-{top}/_metadata"
    cut = len(meta.read_bytes()) // 2
    meta.write_bytes(meta.read_bytes()[:cut])
    obj = deployment(each, url)
    response = answer(RestorePolicy(), obj)
    assert chosen(response, obj) == f"{url}/ck/{each.job_id}/chk-{below}"
    assert re.search(
        rf"skipped chk-{top}: _metadata ends at byte {cut:,} inside operator [0-9]+", warnings(response)
    )


@pytest.mark.parametrize("name", ["2.3.0-rocksdb-incremental", "1.20.5-rocksdb-file-merging"])
def test_deleting_any_file_the_newest_checkpoint_names_skips_it(name: str, tmp_path: Path) -> None:
    each = tree(name)
    url = spelled(materialize(each, tmp_path))
    top = each.checkpoints()[0]
    obj = deployment(each, url)
    found = read_metadata((each.folder / f"ck/{each.job_id}/chk-{top}/_metadata").read_bytes())
    assert isinstance(found, Metadata)
    root = str(each.info["root"]) + "/"
    named = sorted(
        {
            f.path[len(root) :] if f.path.startswith(root) else f"ck/{each.job_id}/chk-{top}/{f.path}"
            for f in found.files
        }
    )
    assert len(named) >= 5
    policy = RestorePolicy()
    for rel in named:
        target = tmp_path / rel
        kept = target.read_bytes()
        target.unlink()
        response = answer(policy, obj)
        assert chosen(response, obj) != f"{url}/ck/{each.job_id}/chk-{top}", rel
        assert re.search(
            rf"skipped chk-{top}: 1 of the [0-9]+ files its _metadata names is missing, the first "
            rf"{re.escape(url)}/{re.escape(rel)} \(operator [0-9]+",
            warnings(response),
        ), (rel, warnings(response))
        target.write_bytes(kept)


def test_a_shared_file_only_the_newest_checkpoint_names_restores_the_one_before(tmp_path: Path) -> None:
    """The measured case of the issue: Flink fails on the newest (FileNotFoundException) and restores
    the one before; so does the product's choice."""
    each = tree("2.3.0-rocksdb-incremental")
    top, below = each.checkpoints()[:2]
    gone = next(rel for rel in named_only_by(each, top) if "/shared/" in rel)
    url = spelled(materialize(each, tmp_path, skip=frozenset({gone})))
    obj = deployment(each, url)
    response = answer(RestorePolicy(), obj)
    assert chosen(response, obj) == f"{url}/ck/{each.job_id}/chk-{below}"
    assert f"the first {url}/{gone} (operator" in warnings(response)


def test_a_native_savepoint_restores_when_every_checkpoint_lost_its_shared_files(tmp_path: Path) -> None:
    each = tree("1.20.5-rocksdb-incremental")
    url = spelled(materialize(each, tmp_path))
    shutil.rmtree(tmp_path / f"ck/{each.job_id}/shared")
    obj = deployment(each, url)
    response = answer(RestorePolicy(), obj)
    native = f"{url}/sp/{each.savepoint('native')}"
    canonical = f"{url}/sp/{each.savepoint('canonical')}"
    newer = max((native, canonical), key=lambda p: read_id(tmp_path / p[len(url) + 1 :] / "_metadata"))
    assert chosen(response, obj) == newer
    for n in each.checkpoints():
        assert f"skipped chk-{n}: " in warnings(response)


def read_id(meta: Path) -> int:
    return int.from_bytes(meta.read_bytes()[8:16], "big")


def test_a_checkpoint_whose_metadata_says_another_id_is_skipped(tmp_path: Path) -> None:
    each = tree("2.3.0-hashmap-files")
    url = spelled(materialize(each, tmp_path))
    top, below = each.checkpoints()[:2]
    ck = tmp_path / f"ck/{each.job_id}"
    (ck / f"chk-{top}/_metadata").write_bytes((ck / f"chk-{below}/_metadata").read_bytes())
    obj = deployment(each, url)
    response = answer(RestorePolicy(), obj)
    assert chosen(response, obj) == f"{url}/ck/{each.job_id}/chk-{below}"
    assert f"skipped chk-{top}: _metadata is that of checkpoint {below}, not {top}" in warnings(response)


def test_bytes_after_the_end_restore_with_a_warning(tmp_path: Path) -> None:
    each = tree("1.20.5-hashmap-files")
    url = spelled(materialize(each, tmp_path))
    top = each.checkpoints()[0]
    meta = tmp_path / f"ck/{each.job_id}/chk-{top}/_metadata"
    size = len(meta.read_bytes())
    meta.write_bytes(meta.read_bytes() + b"\n" * 12)
    obj = deployment(each, url)
    response = answer(RestorePolicy(), obj)
    assert chosen(response, obj) == f"{url}/ck/{each.job_id}/chk-{top}"
    assert f"_metadata has 12 bytes after its end at byte {size:,} (Flink ignores them)" in warnings(response)


def test_a_newer_format_is_trusted_by_its_header_or_skipped_as_the_policy_says(tmp_path: Path) -> None:
    each = tree("2.3.0-hashmap-files")
    url = spelled(materialize(each, tmp_path))
    top, below = each.checkpoints()[:2]
    meta = tmp_path / f"ck/{each.job_id}/chk-{top}/_metadata"
    data = meta.read_bytes()
    meta.write_bytes(data[:4] + (9).to_bytes(4, "big") + data[8:])
    obj = deployment(each, url)
    obj["spec"]["flinkVersion"] = "v9_0"  # a Flink newer than this release knows: its reading is not judged
    trusted = answer(RestorePolicy(), obj)
    assert chosen(trusted, obj) == f"{url}/ck/{each.job_id}/chk-{top}"
    assert "_metadata is in format version 9, newer than this release reads: only its header" in warnings(
        trusted
    )
    skipped = answer(RestorePolicy(on_newer_metadata=NewerMetadata.SKIP), obj)
    assert chosen(skipped, obj) == f"{url}/ck/{each.job_id}/chk-{below}"
    assert f"skipped chk-{top}: _metadata is in format version 9" in warnings(skipped)


def test_each_verify_level_checks_what_it_says(tmp_path: Path) -> None:
    each = tree("2.3.0-rocksdb-incremental")
    top, below = each.checkpoints()[:2]
    gone = next(rel for rel in named_only_by(each, top) if "/shared/" in rel)
    url = spelled(materialize(each, tmp_path, skip=frozenset({gone})))
    obj = deployment(each, url)
    newest, previous = f"{url}/ck/{each.job_id}/chk-{top}", f"{url}/ck/{each.job_id}/chk-{below}"
    assert chosen(answer(RestorePolicy(verify=Verify.FILES), obj), obj) == previous
    assert chosen(answer(RestorePolicy(verify=Verify.METADATA), obj), obj) == newest  # files unchecked
    meta = tmp_path / f"ck/{each.job_id}/chk-{top}/_metadata"
    meta.write_bytes(meta.read_bytes()[: 4000 if len(meta.read_bytes()) > 4000 else 100])
    assert chosen(answer(RestorePolicy(verify=Verify.METADATA), obj), obj) == previous
    assert chosen(answer(RestorePolicy(verify=Verify.HEADER), obj), obj) == newest  # the finding


def test_a_lookup_past_its_request_budget_holds_the_job_never_restores_it_unchecked(tmp_path: Path) -> None:
    each = tree("2.3.0-rocksdb-incremental")
    url = spelled(materialize(each, tmp_path))
    obj = deployment(each, url)
    response = answer(RestorePolicy(verify_budget=2), obj)
    assert response["allowed"]
    job = apply(obj, decode_patch(response))["spec"]["job"]
    assert job["state"] == "suspended" and "initialSavepointPath" not in job
    assert "was not checked: the lookup made its 2 storage requests (policy verifyBudget)" in warnings(
        response
    )
    assert "held rather than restored unchecked" in warnings(response)


def test_the_audit_line_counts_the_round_trips(tmp_path: Path) -> None:
    each = tree("2.3.0-rocksdb-incremental")
    url = spelled(materialize(each, tmp_path))
    handler = MemberHandler.from_policy(RestorePolicy())
    try:
        response = handler(parse_review(review(deployment(each, url))))
    finally:
        handler.close()
    fields = response.audit.fields()
    # job dir; chk-N's folder and _metadata beside the shared folder; nothing more for the newest
    assert 2 <= fields["storageRoundTrips"] <= 4, fields
    assert fields["storageRequests"] >= fields["storageRoundTrips"]


# --- on S3 ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        yield endpoint


def bucket(moto: str, name: str) -> s3fs.S3FileSystem:
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(moto))
    fs.mkdir(name)
    return fs


@pytest.mark.parametrize("name", INCREMENTAL)
def test_on_s3_a_missing_shared_file_or_a_cut_metadata_skips_the_newest(moto: str, name: str) -> None:
    each = tree(name)
    fs = bucket(moto, f"restorable-{name.split('-')[0].replace('.', '')}")
    prefix = f"restorable-{name.split('-')[0].replace('.', '')}/t"
    url = upload(each, fs, prefix)
    top, below = each.checkpoints()[:2]
    policy = RestorePolicy(storage_options={"s3": s3_options(moto)})
    obj = deployment(each, url)
    assert chosen(answer(policy, obj), obj) == f"{url}/ck/{each.job_id}/chk-{top}"
    gone = next(rel for rel in named_only_by(each, top) if "/shared/" in rel)
    fs.rm(f"{prefix}/{gone}")
    response = answer(policy, obj)
    assert chosen(response, obj) == f"{url}/ck/{each.job_id}/chk-{below}"
    assert f"skipped chk-{top}: 1 of the " in warnings(response) and f"{url}/{gone}" in warnings(response)
    meta = f"{prefix}/ck/{each.job_id}/chk-{below}/_metadata"
    data = fs.cat_file(meta)
    fs.pipe_file(meta, data[:1000])
    response = answer(policy, obj)
    assert f"skipped chk-{below}: _metadata ends at byte 1,000 inside " in warnings(response)


# --- through the real server, review and the fencing agent ----------------------------------------------


def policy_file(path: Path, **fields: Any) -> Path:
    path.write_text(
        json.dumps({"apiVersion": "flink-failover.io/v1alpha1", "kind": "RestorePolicy", **fields})
    )
    return path


def test_the_served_webhook_and_review_refuse_the_same_cut_checkpoint(tmp_path: Path) -> None:
    each = tree("1.20.5-rocksdb-incremental")
    url = spelled(materialize(each, tmp_path / "state"))
    top, below = each.checkpoints()[:2]
    gone = next(rel for rel in named_only_by(each, top) if "/shared/" in rel)
    (tmp_path / "state" / gone).unlink()
    obj = deployment(each, url)
    policy = policy_file(tmp_path / "policy.json")
    expected = f"{url}/ck/{each.job_id}/chk-{below}"
    reason = f"skipped chk-{top}: 1 of the "
    certs = generate_certs(tmp_path / "certs")
    with serve(certs, policy, tmp_path / "server.log") as server:
        client = server.client()
        try:
            served = client.admit(review(obj))["response"]
        finally:
            client.close()
    assert chosen(served, obj) == expected and reason in warnings(served)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(review(obj)))
    done = subprocess.run(
        [executable(), "review", str(request), "--policy", str(policy)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout + done.stderr and reason in done.stdout + done.stderr


def test_the_fencing_agents_resume_skips_what_flink_cannot_restore(tmp_path: Path) -> None:
    from tests.support.agents import PatchesOnly
    from tests.support.objects import running_deployment
    from webhook.fencing.agent import FencingAgent
    from webhook.fencing.copies import read_copy
    from webhook.restore.storage.search import CheckpointStorage

    each = tree("2.3.0-rocksdb-incremental")
    url = spelled(materialize(each, tmp_path))
    top, below = each.checkpoints()[:2]
    (tmp_path / next(rel for rel in named_only_by(each, top) if "/shared/" in rel)).unlink()
    policy = replace(RestorePolicy(), default_checkpoint_dir=f"{url}/ck", default_savepoint_dir=f"{url}/sp")
    api = PatchesOnly()
    agent = FencingAgent("member1", policy, api, CheckpointStorage())
    obj = running_deployment(each.job_id)
    obj["spec"]["flinkVersion"] = flink_version(each.flink)  # its own Flink: what it wrote, it reads
    copy = read_copy(obj, policy)
    assert asyncio.run(agent.executors.resume(copy)) is None
    job = api.patched[-1]["spec"]["job"]
    assert job["initialSavepointPath"] == f"{url}/ck/{each.job_id}/chk-{below}"
