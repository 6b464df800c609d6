"""The chart's certificate Job and its webhook registration agree: the certificate the Job's exact
command issues is accepted by a client that trusts only ca.crt and checks the host kube-apiserver uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.certs.test_cli import _connect, _serve_once
from tests.chart.test_chart import one, render
from webhook.cli import main


@pytest.mark.parametrize("values", [{}, {"fullnameOverride": "webhook"}])
def test_certgen_job_issues_a_certificate_for_the_registered_service(
    helm: str, tmp_path: Path, values: dict[str, str]
) -> None:
    docs = render(helm, tmp_path, values)
    (job,) = [d for d in docs if d["kind"] == "Job" and d["metadata"]["name"].endswith("-certgen")]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["certs", "generate"]
    args = [a for a in container["args"] if not a.startswith(("--secret=", "--ca-secret=", "--out="))]
    out = tmp_path / "certs"
    assert main([*args, f"--out={out}"]) == 0

    service = one(docs, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["service"]
    hostname = f"{service['name']}.{service['namespace']}.svc"  # what kube-apiserver verifies
    port, thread = _serve_once(out)
    assert _connect(port, out / "ca.crt", hostname) == b"ok"
    thread.join(10)
