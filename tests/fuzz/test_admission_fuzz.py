"""Hostile AdmissionReviews against the parser and the member handler, in process (hypothesis).

The contract: a body either is refused as a bad request (``BadReview`` -> HTTP 400)
or gets a complete answer for its uid; an answer never comes from an internal error, its patch applies
to the object it was computed for, and a restore path never leaves ``<checkpoint dir>/<jobId>/``.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.objects import JOB_ID, flink_deployment, json_paths, make_checkpoints, review
from webhook.common.admission import AdmissionResponse, BadReview, parse_review
from webhook.common.admission import review as run_review
from webhook.member.handler import MemberHandler, RestoreAudit
from webhook.policy.restore import RestorePolicy

FAILOVER = "flink-failover.io/failover"
JOB_LABEL = "flink-failover.io/job-id"
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)

PATH_TRICKS = [
    "../../etc",
    "..",
    "%2e%2e%2f%2e%2e",
    "..%2f..%2fetc",
    JOB_ID + "/../x",
    JOB_ID + "\x00",
    "\x00" + JOB_ID[1:],
    JOB_ID.upper(),
    JOB_ID[:-1] + "\u0430",  # Cyrillic a
    JOB_ID[:-1] + "\uff41",  # fullwidth a
    JOB_ID + "\n",
    " " + JOB_ID,
    "/" + JOB_ID[1:],
    JOB_ID[:31],
    JOB_ID + JOB_ID,
    "",
    "\u202e" + JOB_ID[1:],
]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-ckpt")
    make_checkpoints(root / JOB_ID, [1, 2])
    return root


@pytest.fixture(scope="module")
def handler(ckpt: Path) -> Any:
    h = MemberHandler.from_policy(RestorePolicy(default_checkpoint_dir=str(ckpt), deadline_seconds=2))
    yield h
    h.close()


def check_answer(body: Any, handler: Any, ckpt: Path) -> AdmissionResponse | None:
    """Run the server's code path; None when refused as a bad request. Asserts the invariants."""
    try:
        request, response = run_review(body, handler, _raise)
    except BadReview:
        return None
    review_out = response.to_review(request.api_version)
    json.dumps(review_out)  # serialisable
    assert review_out["kind"] == "AdmissionReview"
    assert review_out["response"]["uid"] == request.uid
    assert isinstance(review_out["response"]["allowed"], bool)
    if "patch" in review_out["response"]:
        ops = json.loads(base64.b64decode(review_out["response"]["patch"]))
        patched = jsonpatch.apply_patch(copy.deepcopy(dict(request.object)), ops)
        path = patched["spec"]["job"].get("initialSavepointPath")
        audit = response.audit
        assert isinstance(audit, RestoreAudit)
        if path is not None and audit.carried:
            # UPDATE: replayed from oldObject (the stored object), storage untouched, by design
            old = request.old_object or {}
            recorded = _get(old, "metadata", "annotations", "flink-failover.io/restored-from")
            assert path in (recorded, _get(old, "spec", "job", "initialSavepointPath")), path
        elif path is not None:
            job_id = audit.job_id
            assert job_id and path.startswith(f"{ckpt}/{job_id}/") and ".." not in path, path
    return response


def _get(node: Any, *keys: str) -> Any:
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _raise(_request: Any, exc: Exception) -> AdmissionResponse:
    raise AssertionError(f"internal error: {type(exc).__name__}: {exc}") from exc


@SETTINGS
@given(body=json_values)
def test_arbitrary_json_is_refused_or_answered(body: Any, handler: Any, ckpt: Path) -> None:
    check_answer(body, handler, ckpt)


def _failover_review(ckpt: Path, nested: bool) -> dict[str, Any]:
    obj = flink_deployment(
        checkpoint_dir=str(ckpt),
        labels={FAILOVER: "true", JOB_LABEL: JOB_ID},
        annotations={"flink-failover.io/last-savepoint": f"{ckpt}/savepoint-3c653d-0123456789ab"},
        nested_config=nested,
    )
    old = copy.deepcopy(obj)
    old["metadata"]["annotations"].update(
        {"flink-failover.io/restore-decision": "restored", "flink-failover.io/restored-from": f"{ckpt}/x"}
    )
    return review(obj, operation="CREATE", old=old)


@SETTINGS
@given(data=st.data(), nested=st.booleans(), operation=st.sampled_from(["CREATE", "UPDATE"]))
def test_wrong_type_in_any_field(
    data: st.DataObject, nested: bool, operation: str, handler: Any, ckpt: Path
) -> None:
    """Replace one field anywhere in a real failover review (envelope, object, oldObject, labels,
    flinkConfiguration, spec.job ...) by a value of any JSON type."""
    body = _failover_review(ckpt, nested)
    body["request"]["operation"] = operation
    paths = [p for p in json_paths(body) if p]
    path = data.draw(st.sampled_from(paths), label="path")
    value = data.draw(json_values, label="value")
    node: Any = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    check_answer(body, handler, ckpt)


@SETTINGS
@given(
    value=st.sampled_from(PATH_TRICKS) | st.text(max_size=64),
    label=st.sampled_from([JOB_LABEL, "application.karmada.io/failover-jobid"]),
)
def test_job_id_labels_with_path_tricks_never_leave_the_job_dir(
    value: str, label: str, handler: Any, ckpt: Path
) -> None:
    obj = flink_deployment(labels={FAILOVER: "true", label: value})
    response = check_answer(review(obj), handler, ckpt)
    assert response is not None
    if value and value != JOB_ID:
        # anything but 32 lowercase hex is refused; never looked up
        assert response.allowed is False and "32 lowercase hex" in response.message
    elif value == JOB_ID:
        assert response.decision == "restored" and response.audit.path == f"{ckpt}/{JOB_ID}/chk-2"


@SETTINGS
@given(
    conf=st.recursive(
        json_scalars | st.sampled_from(["../..", "s3://b/../x", "file:///etc", "/tmp/\x00"]),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    ["execution", "checkpointing", "dir", "state", "checkpoints", "create-subdir", "x"]
                ),
                inner,
                max_size=3,
            )
        ),
        max_leaves=12,
    )
)
def test_flink_configuration_nested_with_any_leaves(conf: Any, handler: Any, ckpt: Path) -> None:
    obj = flink_deployment(labels={FAILOVER: "true", JOB_LABEL: JOB_ID})
    obj["spec"]["flinkConfiguration"] = conf
    response = check_answer(review(obj), handler, ckpt)
    assert response is not None


@pytest.mark.parametrize("size", [1024 * 1024, 3 * 1024 * 1024 - 4096])
def test_huge_strings_in_labels_names_andjson_paths(size: int, handler: Any, ckpt: Path) -> None:
    big = "a" * size
    obj = flink_deployment(
        name=big[:300],
        labels={FAILOVER: "true", JOB_LABEL: big},
        annotations={"flink-failover.io/last-savepoint": "s3://" + big},
        checkpoint_dir="/" + big,
    )
    response = check_answer(review(obj, uid="u" * 256), handler, ckpt)
    assert response is not None and response.allowed is False
    assert len(response.message) < 1000  # never echo megabytes back to the API server


def test_uid_longer_than_kubernetes_allows_is_a_bad_request(handler: Any, ckpt: Path) -> None:
    assert check_answer(review(flink_deployment(), uid="u" * 257), handler, ckpt) is None


@pytest.mark.parametrize("depth", [200, 5000])
@pytest.mark.parametrize("where", ["flinkConfiguration", "labels", "job"])
def test_deep_nesting_is_answered_or_a_bad_request_never_an_internal_error(
    depth: int, where: str, handler: Any, ckpt: Path
) -> None:
    obj = flink_deployment(labels={FAILOVER: "true", JOB_LABEL: JOB_ID})
    deep: Any = "leaf"
    for _ in range(depth):
        deep = {"k": deep}
    if where == "flinkConfiguration":
        obj["spec"]["flinkConfiguration"] = {"execution": deep}
    elif where == "labels":
        obj["metadata"]["labels"]["deep"] = deep
    else:
        obj["spec"]["job"]["args"] = deep
    body = review(obj)
    try:
        request, response = run_review(body, handler, _raise)  # _raise: an internal error fails the test
    except BadReview as exc:
        assert depth > 200 and "nested too deeply" in str(exc)
        return
    assert response.to_review()["response"]["uid"] == request.uid
    assert response.decision == "restored" and response.audit.path == f"{ckpt}/{JOB_ID}/chk-2"


def test_parse_review_rejects_what_is_not_an_admission_review() -> None:
    for body in (
        None,
        [],
        "x",
        1,
        {},
        {"kind": "AdmissionReview"},
        {"kind": "AdmissionReview", "apiVersion": "v1"},
    ):
        with pytest.raises(BadReview):
            parse_review(body)
    good = review(flink_deployment())
    for key, value in (("request", []), ("request", {"uid": 5}), ("request", {"uid": ""})):
        bad = {**good, key: value}
        with pytest.raises(BadReview):
            parse_review(bad)
