"""Policy loading and the AdmissionReview envelope."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.objects import flink_deployment, review
from webhook.common.admission import AdmissionRequest, BadReview, parse_review
from webhook.common.admission import review as handle
from webhook.common.paths import StoragePath, StoragePathError
from webhook.member.handler import internal_error
from webhook.policy.load import DEFAULT_POLICY_FILE, load_policy
from webhook.policy.restore import PolicyError, RestorePolicy, policy_from_dict

HEADER = {"apiVersion": "flink-failover.io/v1alpha1", "kind": "RestorePolicy"}


def test_shipped_default_policy_is_the_documented_default() -> None:
    assert load_policy(DEFAULT_POLICY_FILE) == RestorePolicy()


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"prefer": "oldest"}, "prefer"),
        ({"onStorageError": True}, "onStorageError"),
        ({"deadlineSeconds": 0}, "deadlineSeconds"),
        ({"deadlineSeconds": "5"}, "deadlineSeconds"),
        ({"allowedSchemes": ["ftp"]}, "allowedSchemes"),
        ({"jobIdLabels": "flink-failover.io/job-id"}, "jobIdLabels"),
        ({"jobIdLabels": ["bad key!"]}, "jobIdLabels"),
        ({"storageOptions": {"s3": "endpoint"}}, "storageOptions"),
        ({"defaultCheckpointDir": "ftp://x/y"}, "defaultCheckpointDir"),
        ({"defaultCheckpointDir": "relative/path"}, "defaultCheckpointDir"),
        ({"allowedSchemes": ["file"], "defaultCheckpointDir": "s3://b/c"}, "defaultCheckpointDir"),
        ({"prefix": "Not A Prefix"}, "prefix"),
        ({"deadlineSecond": 5}, "deadlineSecond"),
    ],
)
def test_invalid_policy_names_the_field(doc: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError) as info:
        policy_from_dict({**HEADER, **doc})
    assert info.value.field == field and field in str(info.value)


def test_policy_file_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [")
    with pytest.raises(PolicyError, match="not valid YAML"):
        load_policy(bad)
    bad.write_text("apiVersion: v1\nkind: RestorePolicy\n")
    with pytest.raises(PolicyError, match="apiVersion"):
        load_policy(bad)


def test_prefix_moves_every_contract_key() -> None:
    policy = policy_from_dict({**HEADER, "prefix": "failover.example.com"})
    assert policy.failover_label == "failover.example.com/failover"
    assert policy.key("restored-from") == "failover.example.com/restored-from"


@pytest.mark.parametrize(
    ("uri", "text", "protocol", "fs_path"),
    [
        ("s3p://bucket/a//b/", "s3p://bucket/a/b", "s3", "bucket/a/b"),
        ("S3A://bucket/x", "s3a://bucket/x", "s3", "bucket/x"),
        ("file:///tmp/x/", "file:///tmp/x", "file", "/tmp/x"),
        ("file:/tmp/x", "file:///tmp/x", "file", "/tmp/x"),
        ("/tmp/./x", "/tmp/x", "file", "/tmp/x"),
        ("hdfs://nn:8020/flink", "hdfs://nn:8020/flink", "hdfs", "nn:8020/flink"),
        (
            "abfss://c@acct.dfs.core.windows.net/ck",
            "abfss://c@acct.dfs.core.windows.net/ck",
            "abfs",
            "c@acct.dfs.core.windows.net/ck",
        ),
    ],
)
def test_storage_paths(uri: str, text: str, protocol: str, fs_path: str) -> None:
    path = StoragePath.parse(uri)
    assert (str(path), path.protocol, path.fs_path) == (text, protocol, fs_path)


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "s3://",
        "s3:///key",
        "ftp://h/x",
        "rel/path",
        "/a/../b",
        "file://host/x",
        "/a\x00b",
        "s3://b/x\x7fy",
        "s3://b/x\x1fy",
    ],
)
def test_bad_storage_paths(uri: str) -> None:
    with pytest.raises(StoragePathError):
        StoragePath.parse(uri)


def test_path_containment_is_by_segment() -> None:
    root = StoragePath.parse("s3://b/ckpt/job")
    assert StoragePath.parse("s3a://b/ckpt/job/chk-1").is_within(root)  # s3a and s3 are one storage
    assert not StoragePath.parse("s3://b/ckpt/job2/chk-1").is_within(root)
    assert not StoragePath.parse("s3://other/ckpt/job/chk-1").is_within(root)
    with pytest.raises(StoragePathError):
        root.child("..")


@pytest.mark.parametrize(
    "body",
    [
        [],
        "x",
        {"kind": "AdmissionReview"},
        {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"},
        {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": ""}},
        {"kind": "AdmissionReview", "apiVersion": "v1", "request": {"uid": "u"}},
    ],
)
def test_envelope_errors(body: object) -> None:
    with pytest.raises(BadReview):
        parse_review(body)


def test_an_exception_inside_the_handler_still_gets_a_complete_answer() -> None:
    def broken(_: AdmissionRequest) -> None:
        raise RuntimeError("boom")

    request, response = handle(review(flink_deployment(), uid="crash"), broken, internal_error)  # type: ignore[arg-type]
    answer = response.to_review(request.api_version)
    assert answer["response"]["uid"] == "crash" and answer["response"]["allowed"] is False
    assert (
        answer["response"]["status"]["code"] == 500 and "retried" in answer["response"]["status"]["message"]
    )
