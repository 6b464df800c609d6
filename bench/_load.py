"""The load generator: keep-alive TLS clients in separate processes, timed windows, collected figures.

Shared by the latency benchmark and the soak; it knows requests as bytes and nothing of the webhook."""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import multiprocessing.connection
import os
import socket
import ssl
import threading
import time
from array import array
from dataclasses import dataclass
from typing import Any

from bench._procstat import cpu_seconds, find_moto, machine_busy, process_tree
from tests.support.server import SERVICE_NAME

MAX_REQUESTS_PER_CONNECTION = 200_000  # hard bound besides the time bound

HEALTHZ = f"GET /healthz HTTP/1.1\r\nHost: {SERVICE_NAME}:443\r\n\r\n".encode()


def http_request(body: bytes, path: str = "/mutate") -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {SERVICE_NAME}:443\r\nContent-Type: application/json\r\n"
        f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


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
