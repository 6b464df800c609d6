"""Issue 17 item 7: storageOptions are checked per scheme against what its fsspec backend takes, at load
and in the chart's schema (before: ``endpointUrl`` passed and failed only at the first failover); item
13: a policy with two errors reports both."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from webhook.policy.backend_options import STORAGE_OPTIONS, option_types
from webhook.policy.restore import PolicyError, policy_from_dict

# The fsspec protocols with an option table; their backends are in the dev extra, so every run checks them.
PROTOCOLS = ("s3", "gs", "abfs", "oss", "file")


def backend_parameters(protocol: str) -> dict[str, Any]:
    """Every named constructor parameter of the class fsspec builds for ``protocol`` (the one a
    ``storageOptions`` entry is handed to), with its default: gcsfs and ossfs take ``**kwargs`` in the
    class itself and name their options in a base class, so the whole MRO is read."""
    import fsspec

    cls = fsspec.get_filesystem_class(protocol)
    found: dict[str, Any] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        for name, p in inspect.signature(klass.__init__).parameters.items():
            if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                found.setdefault(name, p.default)
    return found


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


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_option_table_matches_the_installed_backend(protocol: str) -> None:
    """Issue 24: the gs, abfs and oss tables were skipped on every run (backends not installed), and
    gcsfs's and ossfs's own classes name no option (``**kwargs``): the check now reads the MRO."""
    own = backend_parameters(protocol)
    assert len(own) >= 1, f"{protocol}: no named option found: the check would pass by accident"
    assert set(own) <= set(STORAGE_OPTIONS[protocol]), sorted(set(own) - set(STORAGE_OPTIONS[protocol]))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_option_types_match_the_backends_defaults(protocol: str) -> None:
    """A typed option's default in the backend is of a type the policy accepts for it."""
    checked = 0
    for name, default in backend_parameters(protocol).items():
        types = option_types(protocol, name)
        if not types or default is None or not isinstance(default, bool | int | float | str | dict):
            continue  # untyped, or a sentinel
        checked += 1
        if isinstance(default, bool):
            assert bool in types, (protocol, name, default, types)
        else:
            assert isinstance(default, types), (protocol, name, default, types)
    assert checked >= 1, protocol


def test_two_errors_are_both_reported() -> None:
    with pytest.raises(PolicyError) as caught:
        policy_from_dict({"onMissingState": "hold", "deadlineSeconds": 60, "prefer": "oldest"})
    message = str(caught.value)
    assert "onMissingState: 'hold' is not one of" in message
    assert "deadlineSeconds: must be a number in (0, 30]" in message
    assert "prefer: 'oldest' is not one of" in message
