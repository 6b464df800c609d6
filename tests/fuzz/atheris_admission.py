"""Coverage-guided fuzz target (atheris/libFuzzer) for the AdmissionReview parser and member handler.

Not collected by pytest (it needs the atheris wheel, which the project does not depend on). Run::

    python3.11 -m venv .venv-atheris && .venv-atheris/bin/pip install atheris
    PYTHONPATH=.:$(echo .venv/lib/python3.11/site-packages) \
        .venv-atheris/bin/python tests/fuzz/atheris_admission.py -atheris_runs=200000 -max_len=4096

Two inputs per run: the raw bytes as a request body (what the server hands ``json.loads``), and one
field of a real failover review replaced by a value decoded from the input. A crash is any exception
other than a refusal (``BadReview``), an internal error inside the handler, or a restore path outside
``<checkpoint dir>/<jobId>/``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports():
    from tests.support.objects import JOB_ID, flink_deployment, json_paths, make_checkpoints, review
    from webhook.common.admission import AdmissionRequest, AdmissionResponse, BadReview
    from webhook.common.admission import review as run_review
    from webhook.member.handler import MemberHandler, RestoreAudit
    from webhook.policy.restore import RestorePolicy

ROOT = Path(tempfile.mkdtemp(prefix="atheris-ckpt-"))
make_checkpoints(ROOT / JOB_ID, [1, 2])
HANDLER = MemberHandler.from_policy(RestorePolicy(default_checkpoint_dir=str(ROOT), deadline_seconds=2))
SEED = review(
    flink_deployment(labels={"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB_ID})
)


PATHS = [p for p in json_paths(SEED) if p]
_NOT_JSON = object()


def _internal(request: AdmissionRequest, exc: Exception) -> AdmissionResponse:
    raise RuntimeError(f"internal error for {request.uid}: {type(exc).__name__}: {exc}") from exc


def _check(body: Any) -> None:
    try:
        request, response = run_review(body, HANDLER, _internal)
    except BadReview:
        return
    out = response.to_review(request.api_version)
    json.dumps(out)
    assert out["response"]["uid"] == request.uid
    audit = response.audit
    if response.decision == "restored":
        assert isinstance(audit, RestoreAudit)
        if not audit.carried:
            assert audit.path.startswith(f"{ROOT}/{audit.job_id}/"), audit.path


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    raw = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 2048))
    parsed: Any = _NOT_JSON
    with contextlib.suppress(ValueError, RecursionError):  # the server answers 400 for these
        parsed = json.loads(raw)
    if parsed is not _NOT_JSON:
        _check(parsed)
    body = copy.deepcopy(SEED)
    path = PATHS[fdp.ConsumeIntInRange(0, len(PATHS) - 1)]
    text = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 512))
    try:
        value: Any = json.loads(text)
    except (ValueError, RecursionError):
        value = text
    node: Any = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    _check(body)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
