"""Latency and throughput of the member webhook, measured end to end over HTTPS on loopback.

``python -m bench latency [--seconds S] [--clients P] [--connections C] [--config WxT ...] [--sweep]``

The REAL server (``flink-failover serve``: gunicorn gthread, TLS from certificates made by
``flink-failover certs generate``) is driven from separate client processes that keep their
connections alive and verify the server certificate like kube-apiserver (CA bundle + service name).
Each scenario runs twice: *serial* (one connection: the time one admission takes) and *loaded* (C
connections over P processes, closed loop: throughput and latency under saturation). Every run is
bounded by time and by request count. Server, client and moto CPU are measured from /proc so that the
cost of the load generator itself is visible (both share the same cores).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import socket
import ssl
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.objects import flink_deployment, make_checkpoints, review
from tests.support.s3 import moto_server, s3_options
from tests.support.server import SERVICE_NAME, RunningServer, generate_certs, serve

JOB_10 = "10" * 16
JOB_1000 = "1000" * 8
JOB_EMPTY = "e0" * 16
BUCKET = "bench-state"
FAILOVER = "flink-failover.io/failover"
JOB_LABEL = "flink-failover.io/job-id"
MAX_REQUESTS_PER_CONNECTION = 200_000  # hard bound besides the time bound
TICKS = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------------------
# What is sent


@dataclass(frozen=True)
class Scenario:
    name: str
    body: bytes  # JSON AdmissionReview (or anything else for negative cases)
    status: int = 200
    expect: bytes = b""  # a marker that must be in every response body
    storage: str = ""  # what storage the answer needs (for the table)


def _labels(job_id: str) -> dict[str, str]:
    return {FAILOVER: "true", JOB_LABEL: job_id}


def scenarios(checkpoint_root: Path, with_s3: bool) -> list[Scenario]:
    """The benchmark's requests; each carries what its answer must contain."""
    noop = flink_deployment(labels={"app": "orders"})
    create_10 = flink_deployment(labels=_labels(JOB_10))
    create_1000 = flink_deployment(labels=_labels(JOB_1000))
    restored_from = f"{checkpoint_root}/{JOB_10}/chk-10"
    old = flink_deployment(
        labels=_labels(JOB_10),
        annotations={
            "flink-failover.io/restore-decision": "restored",
            "flink-failover.io/restored-from": restored_from,
            "flink-failover.io/restored-job-id": JOB_10,
        },
    )
    old["spec"]["job"].update({"initialSavepointPath": restored_from, "upgradeMode": "last-state"})
    update = flink_deployment(labels=_labels(JOB_10))  # Karmada re-applied its template: fields lost
    out = [
        Scenario("no-op", _dump(review(noop, uid="bench-noop")), expect=b'"allowed":true}}'),
        Scenario(
            "create local 10 chk",
            _dump(review(create_10, uid="bench-c10")),
            expect=b'"patch"',
            storage="local",
        ),
        Scenario(
            "create local 1000 chk",
            _dump(review(create_1000, uid="bench-c1000")),
            expect=b'"patch"',
            storage="local",
        ),
        Scenario(
            "karmada re-apply UPDATE",
            _dump(review(update, operation="UPDATE", old=old, uid="bench-update")),
            expect=b'"patch"',
        ),
    ]
    if with_s3:
        create_s3 = flink_deployment(labels=_labels(JOB_10), checkpoint_dir=f"s3://{BUCKET}/ckpt")
        out.append(
            Scenario(
                "create S3 (moto) 10 chk", _dump(review(create_s3, uid="bench-s3")), 200, b'"patch"', "s3"
            )
        )
    return out


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


HEALTHZ = f"GET /healthz HTTP/1.1\r\nHost: {SERVICE_NAME}:443\r\n\r\n".encode()


def http_request(body: bytes, path: str = "/mutate") -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {SERVICE_NAME}:443\r\nContent-Type: application/json\r\n"
        f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


# --------------------------------------------------------------------------------------------------
# The stack under test


@dataclass
class Stack:
    work: Path
    cert_dir: Path
    policy: Path
    checkpoint_root: Path
    s3_endpoint: str | None


@contextlib.contextmanager
def stack(work: Path, with_s3: bool = True) -> Iterator[Stack]:
    """Certificates, a checkpoint tree (10 / 1,000 retained checkpoints), moto S3 and a policy file."""
    cert_dir = generate_certs(work / "certs")
    root = work / "checkpoints"
    make_checkpoints(root / JOB_10, list(range(1, 11)))
    make_checkpoints(root / JOB_1000, list(range(1, 1001)))
    (root / JOB_EMPTY).mkdir(parents=True)
    with contextlib.ExitStack() as stack_:
        endpoint = None
        if with_s3:
            endpoint = stack_.enter_context(moto_server(work / "moto.log"))
            _seed_s3(endpoint)
        policy = work / "policy.yaml"
        storage = f"storageOptions: {{s3: {json.dumps(s3_options(endpoint))}}}\n" if endpoint else ""
        policy.write_text(
            "apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\n"
            f"defaultCheckpointDir: {root}\ndeadlineSeconds: 5\n{storage}"
        )
        yield Stack(work, cert_dir, policy, root, endpoint)


def _seed_s3(endpoint: str) -> None:
    import s3fs  # the bench process only; clients never touch S3

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))  # type: ignore[arg-type]
    fs.mkdir(BUCKET)
    fs.pipe(
        {
            f"{BUCKET}/ckpt/{JOB_10}/chk-{n}/{name}": b"x"
            for n in range(1, 11)
            for name in ("_metadata", "state")
        }
    )


@contextlib.contextmanager
def server(st: Stack, workers: int, threads: int, log_name: str = "server.log") -> Iterator[RunningServer]:
    with serve(
        st.cert_dir,
        st.policy,
        st.work / log_name,
        extra=["--workers", str(workers), "--threads", str(threads), "--log-level", "info"],
    ) as running:
        yield running


# --------------------------------------------------------------------------------------------------
# Process accounting from /proc


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (gunicorn master + workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_seconds(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / TICKS


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, to show what else ran during a measurement."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return float(sum(values) - idle), float(sum(values))


def find_moto() -> list[int]:
    me = os.getpid()
    pids = []
    for pid in process_tree(me):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"moto_server" in f.read():
                    pids.append(pid)
        except OSError:
            continue
    return pids


# --------------------------------------------------------------------------------------------------
# Load generator (runs in separate processes)


class Connection:
    """A minimal keep-alive HTTP/1.1 client over TLS: pre-built request bytes, Content-Length framing.

    http.client costs several times the server's own per-request work in Python; this keeps the client
    share of the two cores small while verifying the certificate exactly like ApiServerClient.
    """

    def __init__(self, port: int, context: ssl.SSLContext, timeout: float) -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = context.wrap_socket(raw, server_hostname=SERVICE_NAME)
        self.buf = b""
        # Like kube-apiserver, connect when there is something to send: a connection that sits idle
        # before its first request holds a server thread until the server's I/O timeout.
        status, _, _ = self.roundtrip(HEALTHZ)
        if status != 200:
            raise ConnectionError(f"/healthz answered {status}")

    def roundtrip(self, request: bytes) -> tuple[int, bytes, bool]:
        self.sock.sendall(request)
        buf = self.buf
        while (end := buf.find(b"\r\n\r\n")) < 0:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            buf += chunk
        head = buf[:end].decode("latin-1")
        status = int(head[9:12])
        length, close = 0, False
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        body = buf[end + 4 :]
        while len(body) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection mid-body")
            body += chunk
        self.buf = body[length:]
        return status, body[:length], close

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


@dataclass
class LoadSpec:
    """What the client processes send, and when.

    Timeline from a common start: ``warmup`` seconds of all scenarios round-robin (not measured), then
    ``rounds`` rounds of one ``slice`` per scenario (interleaved, so that other work on the machine
    hits every scenario alike). Requests sent in the first ``settle`` seconds of a slice are not
    measured (the previous scenario's requests are still draining). With ``rounds == 0`` the whole
    ``slice`` after warm-up is one measured mix of every scenario (the soak).
    """

    port: int
    ca_file: str
    requests: list[tuple[bytes, int, bytes]]  # per scenario: (request bytes, status, marker)
    connections: int
    warmup: float
    slice: float
    rounds: int
    settle: float = 0.15
    rate: float = 0.0  # requests/s per connection, 0 = closed loop as fast as answers come
    timeout: float = 10.0
    keep_latencies: bool = True

    @property
    def total(self) -> float:
        slices = self.rounds * len(self.requests) if self.rounds else 1
        return self.warmup + slices * self.slice

    def slot(self, elapsed: float, counter: int) -> tuple[int, bool]:
        """(scenario index, measured?) for a request sent ``elapsed`` seconds after the start."""
        n = len(self.requests)
        if elapsed < self.warmup or not self.rounds:
            return counter % n, elapsed >= self.warmup
        k, into = divmod(elapsed - self.warmup, self.slice)
        return int(k) % n, into >= self.settle


def _client_process(spec: LoadSpec, pipe: multiprocessing.connection.Connection) -> None:
    context = ssl.create_default_context(cafile=spec.ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    conns = [Connection(spec.port, context, spec.timeout) for _ in range(spec.connections)]
    pipe.send("ready")
    start = pipe.recv()  # a time.monotonic() value (system-wide clock) shared by every client process
    stop = start + spec.total
    n = len(spec.requests)
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        conn = conns[index]
        latencies = [array("d") for _ in range(n)]
        done, errors = [0] * n, [0] * n
        reconnects = 0
        first_error = ""
        counter = index  # offset so that connections do not all send the same scenario at once
        interval = 1.0 / spec.rate if spec.rate else 0.0
        next_send = start + (index / max(spec.connections, 1)) * interval
        while time.monotonic() < start:
            time.sleep(0.001)
        for _ in range(MAX_REQUESTS_PER_CONNECTION):
            if interval:
                pause = next_send - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                next_send += interval
            sent = time.monotonic()
            if sent >= stop:
                break
            which, measured = spec.slot(sent - start, counter)
            counter += 1
            request, status_expected, marker = spec.requests[which]
            try:
                status, body, close = conn.roundtrip(request)
                ok = status == status_expected and marker in body
                if not ok and not first_error:
                    first_error = f"status {status}: {body[:200]!r}"
                if close:
                    conn.close()
                    conn = Connection(spec.port, context, spec.timeout)
                    reconnects += 1
            except (OSError, ValueError) as exc:
                ok = False
                if not first_error:
                    first_error = f"{type(exc).__name__}: {exc}"
                conn.close()
                try:
                    conn = Connection(spec.port, context, spec.timeout)
                    reconnects += 1
                except OSError:
                    break
            received = time.monotonic()
            if measured:
                done[which] += 1
                if not ok:
                    errors[which] += 1
                elif spec.keep_latencies:
                    latencies[which].append(received - sent)
        conn.close()
        with lock:
            results.append(
                {
                    "latencies": [a.tobytes() for a in latencies],
                    "done": done,
                    "errors": errors,
                    "reconnects": reconnects,
                    "first_error": first_error,
                }
            )

    threads = [threading.Thread(target=run, args=(k,)) for k in range(spec.connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    usage = os.times()
    pipe.send({"results": results, "cpu": usage.user + usage.system})
    pipe.close()


@dataclass
class LoadResult:
    """One scenario's figures."""

    latencies: list[float]
    done: int
    errors: int
    first_error: str
    seconds: float  # measured time
    server_cpu: float  # cores used by the server processes while this scenario was measured
    moto_cpu: float
    machine_busy: float  # fraction of all cores busy (anything on the machine) in the same windows
    client_cpu: float = 0.0  # cores used by the load generator over the whole run (all scenarios)
    reconnects: int = 0

    @property
    def rps(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return math.nan
        index = min(len(self.latencies) - 1, max(0, math.ceil(q / 100 * len(self.latencies)) - 1))
        return self.latencies[index]


@dataclass
class Sample:
    server: float
    moto: float
    busy: tuple[float, float]


class LoadRun:
    """Client processes, started and connected; :meth:`run` starts them together and collects."""

    def __init__(self, spec: LoadSpec, processes: int, server_pid: int) -> None:
        self.spec = spec
        self.server_pid = server_pid
        self._procs: list[Any] = []
        self._pipes: list[multiprocessing.connection.Connection] = []
        ctx = multiprocessing.get_context("spawn")
        for n in _split(spec.connections, processes):
            parent, child = ctx.Pipe()
            sub = LoadSpec(**{**spec.__dict__, "connections": n})
            proc = ctx.Process(target=_client_process, args=(sub, child), daemon=True)
            proc.start()
            child.close()
            self._procs.append(proc)
            self._pipes.append(parent)
        try:
            for pipe in self._pipes:
                if not pipe.poll(60):
                    raise TimeoutError("load client did not connect within 60 s")
                pipe.recv()
        except (TimeoutError, EOFError):
            self.kill()
            raise

    def _windows(self, start: float) -> list[tuple[int, float, float]]:
        """(scenario, from, to) of every measured window, in time order."""
        spec = self.spec
        t0 = start + spec.warmup
        if not spec.rounds:
            return [(-1, t0, t0 + spec.slice)]
        n = len(spec.requests)
        return [
            (k % n, t0 + k * spec.slice + spec.settle, t0 + (k + 1) * spec.slice)
            for k in range(spec.rounds * n)
        ]

    def run(self, on_tick: Any = None, tick: float = 1.0) -> list[LoadResult]:
        server_pids = process_tree(self.server_pid)
        moto_pids = find_moto()

        def sample() -> Sample:
            return Sample(cpu_seconds(server_pids), cpu_seconds(moto_pids), machine_busy())

        spec = self.spec
        n = len(spec.requests)
        start = time.monotonic() + 0.2
        for pipe in self._pipes:
            pipe.send(start)
        spent = [[0.0, 0.0, 0.0, 0.0] for _ in range(max(n, 1))]  # server, moto, busy, total jiffies
        next_tick = start + tick
        for which, t_from, t_to in self._windows(start):
            for target, is_end in ((t_from, False), (t_to, True)):
                while (now := time.monotonic()) < target:
                    if on_tick is not None and now >= next_tick:
                        on_tick()
                        next_tick += tick
                    time.sleep(min(0.005, max(target - now, 0.0)) if not on_tick else min(0.05, target - now))
                snap = sample()
                if not is_end:
                    begin = snap
                    continue
                row = spent[max(which, 0)]
                row[0] += snap.server - begin.server
                row[1] += snap.moto - begin.moto
                row[2] += snap.busy[0] - begin.busy[0]
                row[3] += snap.busy[1] - begin.busy[1]
        bound = start + spec.total + 4 * spec.timeout + 30
        replies = []
        for pipe in self._pipes:
            while not pipe.poll(0.25):
                if time.monotonic() > bound:
                    self.kill()
                    raise TimeoutError("load clients did not finish in time")
            replies.append(pipe.recv())
        for proc in self._procs:
            proc.join(10)
        client_cpu = sum(r["cpu"] for r in replies) / spec.total
        measured = (spec.slice - spec.settle) * spec.rounds if spec.rounds else spec.slice
        out = []
        for which in range(n if spec.rounds else 1):
            latencies: list[float] = []
            done = errors = reconnects = 0
            first_error = ""
            for reply in replies:
                for r in reply["results"]:
                    picks = range(n) if not spec.rounds else [which]
                    for k in picks:
                        lat = array("d")
                        lat.frombytes(r["latencies"][k])
                        latencies.extend(lat)
                        done += r["done"][k]
                        errors += r["errors"][k]
                    reconnects += r["reconnects"]
                    first_error = first_error or r["first_error"]
            latencies.sort()
            server, moto, busy, jiffies = spent[which]
            out.append(
                LoadResult(
                    latencies,
                    done,
                    errors,
                    first_error,
                    measured,
                    server / measured,
                    moto / measured,
                    busy / jiffies if jiffies else 0.0,
                    client_cpu,
                    reconnects,
                )
            )
        return out

    def kill(self) -> None:
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()


def _split(total: int, parts: int) -> list[int]:
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def measure(
    running: RunningServer,
    cases: list[Scenario],
    connections: int,
    processes: int,
    warmup: float,
    seconds: float,
    rounds: int,
) -> list[LoadResult]:
    """Each scenario measured for ``seconds`` in total, over ``rounds`` interleaved slices."""
    spec = LoadSpec(
        running.port,
        str(running.cert_dir / "ca.crt"),
        [(http_request(c.body), c.status, c.expect) for c in cases],
        connections,
        warmup,
        slice=seconds / rounds + 0.15,
        rounds=rounds,
    )
    return LoadRun(spec, processes, running.process.pid).run()


# --------------------------------------------------------------------------------------------------
# Report


def _ms(value: float) -> str:
    return f"{value * 1000:7.2f}" if not math.isnan(value) else "      -"


def table(title: str, rows: list[tuple[Scenario, LoadResult]]) -> str:
    base = rows[0][1]
    lines = [
        title,
        f"{'scenario':<25}{'req/s':>7}{'p50 ms':>8}{'p99 ms':>8}{'p99.9':>8}"
        f"{'p50x':>6}{'p99x':>6}{'p999x':>6}{'rps x':>6}{'n':>7}{'err':>4}"
        f"{'srv cpu':>8}{'ms/req':>7}{'moto':>6}{'busy':>6}",
    ]
    for scenario, r in rows:
        p50, p99 = r.percentile(50), r.percentile(99)
        per_request = r.server_cpu / r.rps * 1000 if r.rps else math.nan
        lines.append(
            f"{scenario.name:<25}{r.rps:7.0f}{_ms(p50):>8}{_ms(p99):>8}{_ms(r.percentile(99.9)):>8}"
            f"{_ratio(p50, base.percentile(50)):>6}{_ratio(p99, base.percentile(99)):>6}"
            f"{_ratio(r.percentile(99.9), base.percentile(99.9)):>6}"
            f"{_ratio(r.rps, base.rps):>6}{r.done:7d}{r.errors:4d}"
            f"{r.server_cpu:8.2f}{per_request:7.2f}{r.moto_cpu:6.2f}{r.machine_busy:6.0%}"
        )
    return "\n".join(lines)


def _ratio(a: float, b: float) -> str:
    if not b or math.isnan(a) or math.isnan(b):
        return "-"
    return f"{a / b:.2f}"


def parse_config(text: str) -> tuple[int, int]:
    workers, _, threads = text.lower().partition("x")
    return int(workers), int(threads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="measured seconds per scenario and mode")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved slices per scenario")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections when loaded")
    parser.add_argument("--clients", type=int, default=2, help="client processes sharing the connections")
    parser.add_argument(
        "--config", action="append", default=[], help="WORKERSxTHREADS, repeatable (default 2x8)"
    )
    parser.add_argument("--sweep", action="store_true", help="also try 1x8 2x4 2x8 3x4 1x16 4x4")
    parser.add_argument("--no-s3", action="store_true", help="skip the moto scenario")
    parser.add_argument("--serial-only", action="store_true")
    parser.add_argument("--loaded-only", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv or [])
    if args.seconds <= 0 or args.seconds > 120 or args.connections < 1 or args.connections > 256:
        parser.error("--seconds must be in (0, 120] and --connections in [1, 256]")
    configs = [parse_config(c) for c in args.config] or [(2, 8)]
    if args.sweep:
        configs = [(1, 8), (2, 4), (2, 8), (3, 4), (1, 16), (4, 4)]
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; "
        f"python {sys.version.split()[0]}; each scenario measured {args.seconds:g} s in {args.rounds} slices "
        f"after {args.warmup:g} s warm-up",
        flush=True,
    )
    failed = False
    figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp, stack(Path(tmp), not args.no_s3) as st:
        cases = scenarios(st.checkpoint_root, st.s3_endpoint is not None)
        for workers, threads in configs:
            with server(st, workers, threads, f"server-{workers}x{threads}.log") as running:
                modes = []
                if not args.loaded_only:
                    modes.append(("serial", 1, 1))
                if not args.serial_only:
                    modes.append(("loaded", args.connections, args.clients))
                for mode, conns, procs in modes:
                    results = measure(running, cases, conns, procs, args.warmup, args.seconds, args.rounds)
                    rows = list(zip(cases, results, strict=True))
                    for case, result in rows:
                        if result.errors:
                            failed = True
                            print(f"  {case.name}: {result.errors} errors, first: {result.first_error}")
                        figures.append(
                            {
                                "config": f"{workers}x{threads}",
                                "mode": mode,
                                "connections": conns,
                                "scenario": case.name,
                                "rps": round(result.rps, 1),
                                "p50_ms": round(result.percentile(50) * 1000, 3),
                                "p99_ms": round(result.percentile(99) * 1000, 3),
                                "p999_ms": round(result.percentile(99.9) * 1000, 3),
                                "requests": result.done,
                                "errors": result.errors,
                                "server_cpu": round(result.server_cpu, 2),
                                "client_cpu": round(result.client_cpu, 2),
                                "moto_cpu": round(result.moto_cpu, 2),
                                "machine_busy": round(result.machine_busy, 2),
                            }
                        )
                    title = (
                        f"\n-- {workers} workers x {threads} threads, {mode}: {conns} keep-alive "
                        f"connection(s) from {min(procs, conns)} client process(es), "
                        f"client cpu {results[0].client_cpu:.2f} cores --"
                    )
                    print(table(title, rows), flush=True)
    print(
        "\ncolumns: p50x/p99x/p999x/rps x = ratio to the no-op in the same run; srv cpu / moto = cores used "
        "by the gunicorn processes / moto while the scenario was measured; ms/req = server CPU per "
        "admission; busy = share of all cores busy on the machine (including other work); scenarios "
        "are interleaved in --rounds slices so that background load hits them alike"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
