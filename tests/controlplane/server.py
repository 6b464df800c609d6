"""The real control-plane server (``flink-failover serve --role control-plane``, gunicorn, TLS) in a
subprocess, and how tests read its answers and the record it persists."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.controlplane import fakeapi
from tests.controlplane import support as s
from tests.support.production import wait_for
from tests.support.server import free_port
from webhook.controlplane.record import BindingRecord
from webhook.policy.load import DEFAULT_POLICY_FILE

BIN = Path(sys.executable).parent / "flink-failover"
KEY = "flink-failover.io/last-known-state"
NS = "analytics"
P = "flink-failover.io/"


class Server:
    def __init__(
        self, kubeconfig: Path, certs: Path, workdir: Path, *extra: str, metrics_dir: bool = True
    ) -> None:
        self.port = free_port()
        self.ca = str(certs / "ca.crt")
        self.log = workdir / f"server-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        if metrics_dir:  # as the chart runs it; without, as a user runs the command by hand
            env["PROMETHEUS_MULTIPROC_DIR"] = str(workdir / f"metrics-{self.port}")
        command = [
            str(BIN), "serve", "--role", "control-plane", "--kubeconfig", str(kubeconfig),
            "--cert-dir", str(certs), "--bind", f"127.0.0.1:{self.port}",
            "--policy", str(DEFAULT_POLICY_FILE), "--threads", "2", *extra,
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            answer = self.get("/readyz")
            return answer is not None and answer.status_code == 200

        assert wait_for(ready, timeout), f"server not ready:\n{self.log.read_text()}"

    def get(self, path: str) -> requests.Response | None:
        """A GET of ``path``; None while nothing answers (a server that exited fails the test)."""
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited {self.proc.returncode}:\n{self.log.read_text()}")
        try:
            return requests.get(self.url + path, verify=self.ca, timeout=2)
        except requests.RequestException:
            return None

    def admit(
        self, work: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        response = requests.post(
            self.url + "/mutate-work",
            json=s.admission_review(work, operation, old),
            verify=self.ca,
            timeout=10,
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def metrics(self) -> str:
        return requests.get(self.url + "/metrics", verify=self.ca, timeout=5).text

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def stored_record(fake: fakeapi.FakeKarmada, name: str) -> BindingRecord | None:
    obj = fake.objects.get((NS, name))
    raw = obj and obj["metadata"].get("annotations", {}).get(KEY)
    parsed = BindingRecord.loads(raw) if raw else None
    return parsed if isinstance(parsed, BindingRecord) else None


def ours(review: dict[str, Any], work: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    import jsonpatch

    response = review["response"]
    assert response["allowed"] is True
    patched = (
        jsonpatch.apply_patch(work, json.loads(base64.b64decode(response["patch"])))
        if "patch" in response
        else work
    )
    meta = s.flink_metadata(patched)
    pick = lambda m: {k[len(P) :]: v for k, v in m.items() if k.startswith(P)}  # noqa: E731
    return pick(meta.get("labels", {})), pick(meta.get("annotations", {}))


def review_offline(workdir: Path, objects: list[dict[str, Any]], review: dict[str, Any]) -> dict[str, Any]:
    """``flink-failover review --role control-plane`` on ResourceBindings from a file, as a user runs it."""
    bindings = workdir / "bindings.yaml"
    bindings.write_text(yaml.safe_dump_all(objects))
    body = workdir / "review.json"
    body.write_text(json.dumps(review))
    done = subprocess.run(
        [str(BIN), "review", "--role", "control-plane", "--objects", str(bindings), str(body)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def wait_record(
    fake: fakeapi.FakeKarmada, name: str, predicate: Callable[[BindingRecord], bool]
) -> BindingRecord:
    """The record persisted on binding ``name`` once it satisfies ``predicate``; fails after 20 s."""
    found: list[BindingRecord] = []

    def check() -> bool:
        record = stored_record(fake, name)
        if record is not None and predicate(record):
            found.append(record)
            return True
        return False

    assert fake.wait_for(check), f"record of {name} never matched; last: {stored_record(fake, name)}"
    return found[-1]
