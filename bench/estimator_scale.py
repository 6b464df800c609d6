"""The estimator at 1,000 and 10,000 nodes on a real kube-apiserver, beside Karmada's own, in one run.

``python -m bench estimator_scale [--sizes 1000,10000] [--callers 50] [--calls 20] [--serial 50]``
(``--pods-per-node N`` for a lighter load; ``--uncached`` also drives ours with ``--answer-cache-entries 0``,
every call computing its answer, beside the default that computes each request once per snapshot)

Per size: etcd and a real kube-apiserver v1.28.4 on loopback holding the recorded 1,000-node cluster
tiled (``bench._inventory``: 34 pods a node, 340,790 pods at 10,000 nodes). The inventory is written
straight into etcd once and the data directory kept in ``.cache/estimator-scale/`` for the next run
(keyed by what it holds); a run says whether it wrote or reused it and the write time. Then the
product's estimator (``flink-failover serve --role estimator``, its defaults) and Karmada's
``karmada-scheduler-estimator`` v1.18.2 (its defaults) list and watch that same API server, and each is
driven in turn by ``--callers`` concurrent callers on one HTTP/2 channel (as the scheduler multiplexes
its calls to one cluster) sending the requests Karmada's client encoded (../shared/data/karmada-estimator,
the cluster name rewritten in place). Reported: time to the first answer after start, RSS and peak RSS,
the server's CPU per call, client-observed p50/p99/max under the callers and p50/p99 of one caller
alone (the cost of one answer without queueing behind 49 others), and each request's answer from each
side by side.
The rounds alternate (ours, Karmada's, ours, Karmada's) so that other work on the shared machine hits
all alike. Goal: ours p99 < 50 ms at 10,000 nodes under the concurrent callers. Bounded by
``--timeout`` (everything is stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import gzip
import hashlib
import http.client
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from bench._inventory import Obj, tiled
from bench._procstat import cpu_seconds, process_tree
from webhook.estimator.proto import estimator_pb2 as pb

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "estimator-scale"
GOAL_P99_MS = 50.0
KARMADA = "v1.18.2"
SERVICE = "/github.com.karmada_io.karmada.pkg.estimator.service.Estimator/"
RECORDED_CLUSTER = b"\x0a\x06c-1000"  # field 1 (cluster) leads every recorded request
REQUESTS = (  # (file, method): the four component workloads and the replicas method
    ("request-components-small.bin", "MaxAvailableComponentSets"),
    ("request-components-medium.bin", "MaxAvailableComponentSets"),
    ("request-components-large.bin", "MaxAvailableComponentSets"),
    ("request-components-ha.bin", "MaxAvailableComponentSets"),
    ("request-replicas-taskmanager.bin", "MaxAvailableReplicas"),
)
ONCE_TIMEOUT_S = 300.0  # one call alone: long enough for Karmada's own estimator at 10,000 nodes
LAYOUT = 1  # bump when the keys or objects written change: old caches are then not reused
RUN_BY_DEFAULT = False  # minutes and gigabytes: run it by name


def data_dir() -> Path:
    from tests.support.repo import shared_data_dir

    return shared_data_dir() / "karmada-estimator"


def for_cluster(request: bytes, name: str) -> bytes:
    """A recorded request addressed to ``name``: field 1 replaced, every other byte as Karmada wrote it."""
    if not request.startswith(RECORDED_CLUSTER):
        raise ValueError("recorded request does not start with cluster c-1000")
    encoded = name.encode()
    return b"\x0a" + bytes([len(encoded)]) + encoded + request[len(RECORDED_CLUSTER) :]


def decode(method: str, reply: bytes) -> int:
    if method == "MaxAvailableComponentSets":
        return int(pb.MaxAvailableComponentSetsResponse.FromString(reply).maxSets)
    return int(pb.MaxAvailableReplicasResponse.FromString(reply).maxReplicas)


# --- etcd: written once, reused -----------------------------------------------------------------------


def _etcd_argv(etcd: Path, data: Path, client: int, peer: int) -> list[str]:
    """The tier's etcd with room for 10,000 nodes' pods and the bulk writes' large transactions."""
    from tests.e2e.apiserver import etcd_argv

    return [
        *etcd_argv(etcd, data, client, peer, quota=8 << 30),
        "--max-txn-ops=2048",
        "--max-request-bytes=16777216",
    ]


def _put_batches(url: str, items: Iterable[tuple[str, Obj]], batch: int = 1000, lanes: int = 3) -> int:
    """Every item PUT through etcd's JSON gateway, ``batch`` to a transaction over ``lanes`` connections."""
    host, port = url.removeprefix("http://").split(":")
    local = threading.local()

    def send(chunk: list[tuple[str, Obj]]) -> int:
        if not hasattr(local, "conn"):
            local.conn = http.client.HTTPConnection(host, int(port), timeout=120)
        ops = [
            {
                "requestPut": {
                    "key": base64.b64encode(key.encode()).decode(),
                    "value": base64.b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode(),
                }
            }
            for key, obj in chunk
        ]
        local.conn.request(
            "POST", "/v3/kv/txn", json.dumps({"success": ops}), {"Content-Type": "application/json"}
        )
        answer = local.conn.getresponse()
        body = answer.read()
        if answer.status != 200 or b'"succeeded":true' not in body:
            raise RuntimeError(f"etcd txn failed: {answer.status} {body[:300]!r}")
        return len(chunk)

    written = 0
    with concurrent.futures.ThreadPoolExecutor(lanes) as pool:
        pending: set[concurrent.futures.Future[int]] = set()
        chunk: list[tuple[str, Obj]] = []
        for item in items:
            chunk.append(item)
            if len(chunk) == batch:
                pending.add(pool.submit(send, chunk))
                chunk = []
                if len(pending) >= lanes * 2:
                    done, pending = concurrent.futures.wait(pending, return_when="FIRST_COMPLETED")
                    written += sum(f.result() for f in done)
        if chunk:
            pending.add(pool.submit(send, chunk))
        written += sum(f.result() for f in concurrent.futures.as_completed(pending))
    return written


@dataclass
class Inventory:
    name: str
    nodes: int
    pods: int
    data: Path
    wrote: bool
    write_s: float


def inventory_key(nodes: int, pods_per_node: int | None) -> str:
    source = hashlib.sha256()
    for name in ("cluster-c-1000-nodes.json", "cluster-c-1000-pods.json.gz"):
        source.update((data_dir() / name).read_bytes())
    source.update(f"{LAYOUT}/{nodes}/{pods_per_node}".encode())
    return source.hexdigest()[:12]


def _recorded() -> tuple[list[Obj], list[Obj]]:
    nodes = json.loads((data_dir() / "cluster-c-1000-nodes.json").read_text())["items"]
    with gzip.open(data_dir() / "cluster-c-1000-pods.json.gz") as fh:
        pods = json.load(fh)["items"]
    return nodes, pods


# --- processes ----------------------------------------------------------------------------------------


def _rss(pid: int) -> tuple[float, float]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


@dataclass
class Estimator:
    label: str
    pid: int
    port: int
    ready_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    serial: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    calls: int = 0
    errors: int = 0
    deadline_exceeded: int = 0
    settle_s: float = 0.0
    answers: dict[str, set[int]] = field(default_factory=dict)


def _first_answer(port: int, request: bytes, alive: Any, timeout: float) -> None:
    """Until the estimator answers a real request (both serve only once their informers are synced).

    Retried only while it is not serving yet: a call that times out would go on computing in a Go
    server after the client gave up, and pile up behind the next.
    """
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(SERVICE + "MaxAvailableComponentSets")
        while True:
            if not alive():
                raise RuntimeError("estimator exited before its first answer")
            try:
                call(request, timeout=max(1.0, deadline - time.monotonic()), wait_for_ready=True)
                return
            except grpc.RpcError as failed:
                if failed.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def _each_once(port: int, requests: Sequence[tuple[str, str, bytes]], timeout: float) -> dict[str, Any]:
    """Every request once, alone, with a long deadline: the answers side by side, and one call's time."""
    out: dict[str, Any] = {}
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        for name, method, body in requests:
            started = time.perf_counter()
            try:
                reply = channel.unary_unary(SERVICE + method)(body, timeout=timeout)
                out[name] = (decode(method, reply), (time.perf_counter() - started) * 1000)
            except grpc.RpcError as failed:
                out[name] = (f"{failed.code().name}", (time.perf_counter() - started) * 1000)
    return out


@dataclass
class Driven:
    latencies: list[float] = field(default_factory=list)
    answers: dict[str, set[int]] = field(default_factory=dict)
    deadline_exceeded: int = 0
    errors: int = 0


async def _drive(
    port: int,
    requests: Sequence[tuple[str, str, bytes]],
    callers: int,
    calls: int,
    deadline_s: float,
    budget_s: float,
) -> Driven:
    """``callers`` closed-loop callers on one channel, each ``calls`` calls cycling through the requests.

    Each call has the scheduler's deadline; a caller stops after 3 deadlines in a row or when the
    budget is spent, so a server that cannot keep up ends the phase instead of the run.
    """
    out = Driven()
    stop_at = time.monotonic() + budget_s
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stubs = {m: channel.unary_unary(SERVICE + m) for m in {r[1] for r in requests}}

        async def caller(index: int) -> None:
            missed = 0
            for i in range(calls):
                if missed >= 3 or time.monotonic() > stop_at:
                    return
                name, method, body = requests[(index + i) % len(requests)]
                started = time.perf_counter()
                try:
                    reply = await stubs[method](body, timeout=deadline_s)
                except grpc.aio.AioRpcError as failed:
                    if failed.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                        out.deadline_exceeded += 1
                        missed += 1
                    else:
                        out.errors += 1
                    continue
                missed = 0
                out.latencies.append((time.perf_counter() - started) * 1000)
                out.answers.setdefault(name, set()).add(decode(method, reply))

        await asyncio.gather(*(caller(i) for i in range(callers)))
    return out


def _settle(pids: Sequence[int], limit_s: float) -> float:
    """Until the server's CPU is idle (calls abandoned at their deadline may still be computed)."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        before = cpu_seconds(pids)
        time.sleep(1.0)
        if cpu_seconds(pids) - before < 0.05:
            break
    return time.monotonic() - started


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- one size -----------------------------------------------------------------------------------------


def run_size(
    nodes: int,
    pods_per_node: int | None,
    callers: int,
    calls: int,
    rounds: int,
    serial: int,
    deadline_s: float,
    work: Path,
    uncached: bool = False,
) -> dict[str, Any]:
    from tests.e2e.apiserver import Etcd, start_apiserver
    from tests.e2e.pki import write_pki
    from tests.e2e.procs import Processes, wait_until
    from tests.estimator.support import serve_command
    from tests.support.server import free_port

    name = f"c-{nodes}"
    key = inventory_key(nodes, pods_per_node)
    cached = CACHE / f"{name}-{key}"
    procs = Processes(work / "logs")
    try:
        from tests.e2e.assets import etcd_binary

        client, peer = free_port(), free_port()
        reused = (cached / ".complete").is_file()
        if not reused:
            shutil.rmtree(cached, ignore_errors=True)
            cached.mkdir(parents=True)
        etcd_process = procs.start(f"etcd-{name}", _etcd_argv(etcd_binary(), cached / "etcd", client, peer))
        etcd = Etcd(f"http://127.0.0.1:{client}", etcd_process)
        wait_until("etcd", lambda: _health(etcd.url), 60, [etcd_process])
        if reused:
            meta = json.loads((cached / ".complete").read_text())
        else:
            print(f"  {name}: writing the inventory into etcd (once; kept in {cached})", flush=True)
            started = time.perf_counter()
            recorded_nodes, recorded_pods = _recorded()
            tiles = max(1, nodes // len(recorded_nodes))
            counts = {"minions": 0, "pods": 0}

            def prefixed() -> Iterator[tuple[str, Obj]]:
                for k, obj in tiled(recorded_nodes, recorded_pods, tiles, pods_per_node):
                    counts[k.split("/")[1]] += 1
                    yield f"/{name}{k}", obj

            _put_batches(etcd.url, prefixed())
            meta = {
                "nodes": counts["minions"],
                "pods": counts["pods"],
                "write_s": time.perf_counter() - started,
                "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            }
            (cached / ".complete").write_text(json.dumps(meta))
        certs = write_pki(work / "pki")
        started = time.perf_counter()
        api = start_apiserver(procs, _kube_apiserver(), name, etcd, certs, work / name)
        api_ready_s = time.perf_counter() - started
        kubeconfig = api.kubeconfig

        requests = [
            (
                file.removeprefix("request-").removesuffix(".bin"),
                method,
                for_cluster((data_dir() / file).read_bytes(), name),
            )
            for file, method in REQUESTS
        ]
        probe = requests[2][2]  # large: the fewest sets, the cheapest first answer for both
        ours_port, side = free_port(), free_port()
        started = time.perf_counter()
        ours_proc = procs.start(
            f"ours-{name}", serve_command(name, kubeconfig, ours_port, side, "--log-level", "warning")
        )
        _first_answer(ours_port, probe, ours_proc.alive, 900)
        ours = Estimator("ours", ours_proc.popen.pid, ours_port, time.perf_counter() - started)
        estimators = [ours]
        if uncached:  # the same server computing every call: what an answer costs when no two calls agree
            plain_port = free_port()
            started = time.perf_counter()
            plain_proc = procs.start(
                f"ours-uncached-{name}",
                serve_command(
                    name,
                    kubeconfig,
                    plain_port,
                    free_port(),
                    "--log-level",
                    "warning",
                    "--answer-cache-entries",
                    "0",
                ),
            )
            _first_answer(plain_port, probe, plain_proc.alive, 900)
            estimators.append(
                Estimator(
                    "ours, no answer cache", plain_proc.popen.pid, plain_port, time.perf_counter() - started
                )
            )
        theirs_port = free_port()
        estimator = _karmada_estimator()
        started = time.perf_counter()
        theirs_proc = procs.start(
            f"karmada-{name}",
            [
                str(estimator),
                f"--kubeconfig={kubeconfig}",
                f"--cluster-name={name}",
                f"--server-port={theirs_port}",
                f"--health-probe-bind-address=127.0.0.1:{free_port()}",
                f"--metrics-bind-address=127.0.0.1:{free_port()}",
            ],
        )
        _first_answer(theirs_port, probe, theirs_proc.alive, 900)
        theirs = Estimator(
            f"Karmada {KARMADA}", theirs_proc.popen.pid, theirs_port, time.perf_counter() - started
        )
        estimators.append(theirs)

        load = os.getloadavg()[0]
        once = {est.label: _each_once(est.port, requests, ONCE_TIMEOUT_S) for est in estimators}
        for _ in range(rounds):
            for est in estimators:
                pids = process_tree(est.pid)
                slowest = max(ms for _, ms in once[est.label].values())
                if slowest < deadline_s * 1000:
                    asyncio.run(_drive(est.port, requests, callers, 2, deadline_s, 60))  # warm-up
                    cpu = cpu_seconds(pids)
                    driven = asyncio.run(_drive(est.port, requests, callers, calls, deadline_s, 300))
                    est.cpu_s += cpu_seconds(pids) - cpu
                    est.latencies += driven.latencies
                    est.errors += driven.errors
                    est.deadline_exceeded += driven.deadline_exceeded
                    est.calls += len(driven.latencies) + driven.errors + driven.deadline_exceeded
                    for k, v in driven.answers.items():
                        est.answers.setdefault(k, set()).update(v)
                    est.settle_s = max(est.settle_s, _settle(pids, 600))
                alone = asyncio.run(_drive(est.port, requests, 1, serial, ONCE_TIMEOUT_S, 120))
                est.serial += alone.latencies
                est.errors += alone.errors
                est.deadline_exceeded += alone.deadline_exceeded
        load_end = os.getloadavg()[0]
        api_rss = _rss(api.process.popen.pid)
        return {
            "name": name,
            "nodes": meta["nodes"],
            "pods": meta["pods"],
            "reused": reused,
            "write_s": meta["write_s"],
            "written": meta["written"],
            "api_ready_s": api_ready_s,
            "api_rss": api_rss,
            "load_start": load,
            "load_end": load_end,
            "deadline_s": deadline_s,
            "estimators": [
                {
                    "label": e.label,
                    "ready_s": e.ready_s,
                    "rss": _rss(e.pid),
                    "p50": statistics.median(e.latencies) if e.latencies else None,
                    "p99": _percentile(e.latencies, 0.99) if e.latencies else None,
                    "max": max(e.latencies) if e.latencies else None,
                    "serial_p50": statistics.median(e.serial) if e.serial else None,
                    "serial_p99": _percentile(e.serial, 0.99) if e.serial else None,
                    "serial_calls": len(e.serial),
                    "deadline_exceeded": e.deadline_exceeded,
                    "settle_s": e.settle_s,
                    "once": once[e.label],
                    "cpu_ms_per_call": e.cpu_s * 1000 / max(1, e.calls),
                    "calls": e.calls,
                    "errors": e.errors,
                    "answers": {k: sorted(v) for k, v in e.answers.items()},
                }
                for e in estimators
            ],
        }
    finally:
        procs.stop_all()


def _health(url: str) -> bool:
    import urllib.request

    with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:  # nosec B310: loopback etcd
        return bool(json.loads(answer.read())["health"] == "true")


def _unpacked(archive: str) -> Path:
    from tests.e2e import assets

    folder = assets.assets_dir() or REPO.parent / "shared" / "e2e"
    path = folder / archive
    if path.is_dir():
        return assets._root_of(path)
    return assets._unpacked(path, assets._checksums(folder / "SHA256SUMS").get(path.name))


def _kube_apiserver() -> Path:
    from tests.e2e.assets import KUBERNETES

    return _unpacked(f"kubernetes-{KUBERNETES}-linux-amd64.tar.xz") / "bin" / "kube-apiserver"


def _karmada_estimator() -> Path:
    return _unpacked(f"karmada-{KARMADA}-linux-amd64.tar.xz") / "bin" / "karmada-scheduler-estimator"


# --- report -------------------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def report(result: dict[str, Any], callers: int) -> None:
    how = (
        f"reused (written {result['written']} in {result['write_s']:.0f} s)"
        if result["reused"]
        else f"written now in {result['write_s']:.0f} s"
    )
    print(
        f"{result['name']}: {result['nodes']:,} nodes, {result['pods']:,} pods; etcd {how}; "
        f"kube-apiserver ready in {result['api_ready_s']:.1f} s, "
        f"RSS {result['api_rss'][0]:.0f} MiB (peak {result['api_rss'][1]:.0f})"
    )
    print(
        f"  {callers} concurrent callers on one channel, deadline {result['deadline_s']:.0f} s a call;"
        f" load average {result['load_start']:.2f} at the start of the calls, {result['load_end']:.2f} at the"
        f" end, {os.cpu_count()} cores shared"
    )
    header = (
        "estimator", "first answer", "RSS", "peak RSS", "CPU/call", "calls", "deadline missed", "errors",
        "p50", "p99", "max", "1 caller p50", "1 caller p99",
    )  # fmt: skip
    rows = [header]
    for e in result["estimators"]:
        rows.append(
            (
                e["label"],
                f"{e['ready_s']:.1f} s",
                f"{e['rss'][0]:.0f} MiB",
                f"{e['rss'][1]:.0f} MiB",
                f"{e['cpu_ms_per_call']:.2f} ms" if e["calls"] else "-",
                str(e["calls"]),
                str(e["deadline_exceeded"]),
                str(e["errors"]),
                _ms(e["p50"]),
                _ms(e["p99"]),
                _ms(e["max"]),
                _ms(e["serial_p50"]),
                _ms(e["serial_p99"]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        cells = (c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        print("  " + "  ".join(cells))
    for e in result["estimators"]:
        if not e["calls"]:
            print(f"  {e['label']}: no concurrent calls (one call alone took longer than the deadline)")
        elif e["deadline_exceeded"] and e["settle_s"] > 1.5:
            print(f"  {e['label']}: busy {e['settle_s']:.0f} s after its callers stopped (abandoned calls)")
    ours = result["estimators"][0]
    labels = ", ".join(e["label"] for e in result["estimators"])
    print(f"  answers, each request alone (sets, or replicas for the replicas request): {labels}")
    for request in ours["once"]:
        row = "  ".join(
            f"{v!s:>6} ({ms:9.1f} ms)" for v, ms in (e["once"][request] for e in result["estimators"])
        )
        mark = "" if len({e["once"][request][0] for e in result["estimators"]}) == 1 else "   <- differ"
        print(f"    {request:<24} {row}{mark}")
        for e in result["estimators"]:
            seen = e["answers"].get(request, [])
            if seen and seen != [e["once"][request][0]]:
                print(f"      {e['label']} answered {seen} under load")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench estimator_scale")
    parser.add_argument("--sizes", default="1000,10000", help="node counts, multiples of 1,000")
    parser.add_argument(
        "--pods-per-node", type=int, default=None, help="fewer pods a node (default: all, 34)"
    )
    parser.add_argument("--callers", type=int, default=50, help="concurrent callers (a fleet's bindings)")
    parser.add_argument("--calls", type=int, default=20, help="calls per caller per round")
    parser.add_argument("--serial", type=int, default=50, help="calls of one caller alone per round")
    parser.add_argument(
        "--deadline", type=float, default=3.0, help="seconds a call may take (Karmada's scheduler: 3 s)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per estimator")
    parser.add_argument("--timeout", type=float, default=3600, help="stop everything after this many seconds")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--uncached",
        action="store_true",
        help="also drive ours with --answer-cache-entries 0 (every call computes its answer)",
    )
    args = parser.parse_args(argv)
    if not (data_dir() / "cluster-c-1000-pods.json.gz").is_file():
        print(f"recorded cluster not found in {data_dir()}", file=sys.stderr)
        return 1
    watchdog = threading.Timer(args.timeout, lambda: os.kill(os.getpid(), signal.SIGTERM))
    watchdog.daemon = True
    watchdog.start()
    results = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            with tempfile.TemporaryDirectory(prefix="estimator-scale-") as tmp:
                result = run_size(
                    size,
                    args.pods_per_node,
                    args.callers,
                    args.calls,
                    args.rounds,
                    args.serial,
                    args.deadline,
                    Path(tmp),
                    args.uncached,
                )
            report(result, args.callers)
            results.append(result)
    finally:
        watchdog.cancel()
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    for r in results:
        if r["nodes"] < 10000:
            continue
        ours = r["estimators"][0]
        p99 = ours["p99"]
        verdict = "met" if p99 is not None and p99 < GOAL_P99_MS else "MISSED"
        print(
            f"{r['nodes']:,} nodes: ours p99 {_ms(p99)} under {args.callers} concurrent callers (goal <"
            f" {GOAL_P99_MS:.0f} ms: {verdict}); {_ms(ours['serial_p99'])} for one caller alone;"
            f" {ours['cpu_ms_per_call']:.2f} ms of CPU a call"
        )
    errors = sum(r["estimators"][0]["errors"] + r["estimators"][0]["deadline_exceeded"] for r in results)
    return 1 if errors else 0  # timings inform; our failed calls fail, Karmada's are reported


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
