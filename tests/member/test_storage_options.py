"""Issue 17 item 7: storageOptions are checked per scheme against what its fsspec backend takes, at load
and in the chart's schema (before: ``endpointUrl`` passed and failed only at the first failover); item
13: a policy with two errors reports both."""

from __future__ import annotations

import importlib
import inspect

import pytest

from webhook.member.policy import STORAGE_OPTIONS, PolicyError, policy_from_dict

# fsspec protocol -> (module, class) of the backend, when installed
BACKEND_CLASSES = {
    "s3": ("s3fs", "S3FileSystem"),
    "gs": ("gcsfs", "GCSFileSystem"),
    "abfs": ("adlfs", "AzureBlobFileSystem"),
    "oss": ("ossfs", "OSSFileSystem"),
    "file": ("fsspec.implementations.local", "LocalFileSystem"),
}


def test_a_typo_in_storage_options_fails_at_load_and_names_the_option() -> None:
    with pytest.raises(PolicyError) as caught:
        policy_from_dict({"storageOptions": {"s3": {"endpointUrl": "http://minio:9000", "key": "k"}}})
    assert "s3.endpointUrl is not an option of the s3 backend (did you mean endpoint_url?)" in str(
        caught.value
    )
    with pytest.raises(PolicyError, match=r"s3a.client_kwarg is not an option .*did you mean client_kwargs"):
        policy_from_dict({"storageOptions": {"s3a": {"client_kwarg": {}}}})
    ok = policy_from_dict(
        {"storageOptions": {"s3": {"endpoint_url": "http://minio:9000"}, "gs": {"project": "p"}}}
    )
    assert ok.storage_options["s3"]["endpoint_url"] == "http://minio:9000"


@pytest.mark.parametrize("protocol", sorted(BACKEND_CLASSES))
def test_the_option_table_matches_the_installed_backend(protocol: str) -> None:
    module_name, class_name = BACKEND_CLASSES[protocol]
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ImportError:
        pytest.skip(f"{module_name} not installed")
    own = {
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }
    assert own <= set(STORAGE_OPTIONS[protocol]), sorted(own - set(STORAGE_OPTIONS[protocol]))


def test_two_errors_are_both_reported() -> None:
    with pytest.raises(PolicyError) as caught:
        policy_from_dict({"onMissingState": "hold", "deadlineSeconds": 60, "prefer": "oldest"})
    message = str(caught.value)
    assert "onMissingState: 'hold' is not one of" in message
    assert "deadlineSeconds: must be a number in (0, 30]" in message
    assert "prefer: 'oldest' is not one of" in message
