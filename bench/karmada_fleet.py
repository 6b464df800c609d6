"""A fleet soak on real Karmada: thousands of FlinkDeployments evicted at once, beside Karmada's own figures.

``python -m bench karmada_fleet [--jobs 2000] [--version v1.18.2] [--timeout 3000] [--poll S] [--buckets K]
[--json F]``
(``make soak-e2e JOBS=2000``; needs ``FLINK_FAILOVER_E2E_ASSETS`` and ``MOTO_SERVER``, which the target sets)

The end-to-end tier's stack and fleet, unchanged (``tests/e2e``: real kube-apiservers, etcd, Karmada, the
product installed from its chart, an operator double per member; ``flows.evict_fleet``): ``--jobs`` jobs
on member1, tainted ``NoExecute``, each restored on member2. Reported: how many were restored from their
newest checkpoint and counted once, the seconds two copies were RUNNING (status sampled on both members),
the Work webhook's and the member webhook's server-side p50/p99 (their audit lines) and, as the API
servers saw them, their admission time (``apiserver_admission_webhook_admission_duration_seconds``);
Karmada's time from the taint to the last new Work and the time to the last new object on member2; the
product's share of that (its webhooks' summed time, as if every admission had been on the critical path
one after another: an upper bound); the RSS and peak RSS of every process, our roles and Karmada's
components side by side, sampled every 2 s.

The store keeps up by two means together. S3 is spread over K moto servers (``--buckets``, default
``jobs / 250``, 1 to 8): the jobs' checkpoint directories in K buckets, job i's in bucket i mod K, each
bucket on its own moto server, behind one endpoint (``tests/support/s3router.py`` forwards each request by
its bucket; the policy names one endpoint per scheme). One moto process is one Python interpreter on one
core whose listings walk every key of a bucket: at 1,000 jobs it refused the member webhook's lookups on
their 5 s deadline. And the member role's fencing poll is slowed with the size (``--poll``, default
``max(3, jobs / 25)`` s, the renew deadline two polls, the lease what the chart's rules need): every running
job's heartbeat is renewed by both replicas every poll; faster polls on a store that slow make healthy
jobs step down, as they should. Each of the fleet's waits is bounded by ``300 + jobs`` s, the whole run by
``--timeout`` seconds (SIGALRM), every process stopped on any exit (Ctrl-C too).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from bench._procstat import machine_busy, process_tree, rss_mib
from tests.e2e import flows
from tests.e2e.apiserver import ADMIN_TOKEN
from tests.e2e.informer import Informer
from tests.e2e.rest import Rest
from tests.e2e.scenario import NAMESPACE, PREFIX, World

RUN_BY_DEFAULT = False  # a stack and thousands of jobs: tens of minutes, run it by name
WEBHOOK_METRIC = "apiserver_admission_webhook_admission_duration_seconds"


def fencing_for(poll: float) -> dict[str, float]:
    """The member role's timings around ``poll`` within the chart's rules (renew deadline at least two
    polls; renew deadline + poll + stop margin + a poll of slack within the lease)."""
    stop_margin = 4.0
    renew = 2 * poll
    return {
        "pollSeconds": poll,
        "renewDeadlineSeconds": renew,
        "stopMarginSeconds": stop_margin,
        "leaseSeconds": renew + 2 * poll + stop_margin + 4,
    }


@dataclass
class Memory:
    """RSS of every process of the stack (with its children: gunicorn workers), sampled: MiB now, peak."""

    world: World
    now: dict[str, float] = field(default_factory=dict)
    peak: dict[str, float] = field(default_factory=dict)
    load_peak: float = 0.0  # the highest 1-minute load average seen
    _halt: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Memory:
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(10)
        self.sample()

    def _run(self) -> None:
        while not self._halt.wait(2.0):
            self.sample()

    def sample(self) -> None:
        pids = {process.name: process.popen.pid for process in list(self.world.stack.procs.started)}
        pids.update(self.world.stack.side_pids)  # the moto servers and their router at scale
        self.load_peak = max(self.load_peak, os.getloadavg()[0])
        for name, pid in pids.items():
            mib = rss_mib(process_tree(pid))
            self.now[name] = mib
            self.peak[name] = max(mib, self.peak.get(name, 0.0))


def roles(world: World) -> dict[str, list[str]]:
    """Process names by what they are: our roles (by release), Karmada's components, the rest."""
    out: dict[str, list[str]] = {}
    ours = set()
    for release, running in world.stack.releases.items():
        names = [pod.process.name for pod in running.replicas()]
        out[f"flink-failover {release}"] = names
        ours.update(names)
    for process in world.stack.procs.started:
        if process.name not in ours:
            out.setdefault(process.name, []).append(process.name)
    side = world.stack.side_pids
    if side:
        out[f"S3: {len(side) - 1} moto servers"] = [n for n in side if n.startswith("moto-")]
        out["S3: router"] = [n for n in side if not n.startswith("moto-")]
    return out


@dataclass
class WorkClock:
    """When each Work appeared in the target's execution namespace, as the Karmada API server's watch said."""

    informer: Informer
    added: dict[str, float] = field(default_factory=dict)

    @classmethod
    def start(cls, world: World, target: str) -> WorkClock:
        namespace = f"karmada-es-{target}"
        clock = cls(Informer(world.stack.karmada_api(), "/apis/work.karmada.io/v1alpha1/works", "works"))

        def seen(kind: str, obj: dict[str, Any], at: float) -> None:
            meta = obj.get("metadata") or {}
            if kind == "ADDED" and meta.get("namespace") == namespace:
                clock.added.setdefault(str(meta.get("name")), at)

        clock.informer.handlers.append(seen)
        clock.informer.start()
        return clock


def webhook_seconds(api: Rest) -> dict[str, tuple[float, float]]:
    """Per webhook, (sum of seconds, count) of the API server's admission calls to it, all operations."""
    out: dict[str, tuple[float, float]] = {}
    for line in api.raw("/metrics").splitlines():
        if not line.startswith(WEBHOOK_METRIC + "_sum{") and not line.startswith(WEBHOOK_METRIC + "_count{"):
            continue
        labels, value = line.rsplit(" ", 1)
        name = labels.split('name="', 1)[1].split('"', 1)[0]
        total, count = out.get(name, (0.0, 0.0))
        if "_sum{" in labels:
            total += float(value)
        else:
            count += float(value)
        out[name] = (total, count)
    return out


def _delta(
    after: dict[str, tuple[float, float]], before: dict[str, tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    return {
        name: (total - before.get(name, (0.0, 0.0))[0], count - before.get(name, (0.0, 0.0))[1])
        for name, (total, count) in after.items()
        if count - before.get(name, (0.0, 0.0))[1] > 0
    }


def _servers(world: World) -> dict[str, Rest]:
    karmada = world.stack.karmada
    out = {"karmada-apiserver": Rest(karmada.api.url, karmada.api.ca, ADMIN_TOKEN)}
    for name, member in karmada.members.items():
        out[name] = Rest(member.api.url, member.api.ca, ADMIN_TOKEN)
    return out


def measure(world: World, size: int, say: Any) -> dict[str, Any]:
    """The fleet evicted on ``world``; every figure of the soak."""
    source, target = sorted(world.operators)
    jobs: list[str] = []
    servers = _servers(world)
    memory = Memory(world).start()
    works = WorkClock.start(world, target)
    before = {name: webhook_seconds(api) for name, api in servers.items()}
    busy0 = machine_busy()
    try:
        run = flows.evict_fleet(world, jobs, size, say, bound=300 + size)  # --timeout bounds the whole
    finally:
        memory.stop()
        works.informer.stop()
    busy1 = machine_busy()
    after = {name: webhook_seconds(api) for name, api in servers.items()}
    outcomes = run.outcomes
    restored = sum(
        1
        for o in outcomes
        if o.old.checkpoints
        and o.new.started_from.endswith(f"/{o.old.job_id}/chk-{o.old.checkpoints[-1][0]}")
    )
    counted_once = sum(1 for o in outcomes if o.annotations.get(f"{PREFIX}/failover-count") == "1")
    work_ms = sorted(float(e["ms"]) for e in world.admissions("control-plane", run.since, "Work"))
    member_entries = world.admissions(f"member-{target}", run.since, "FlinkDeployment")
    member_ms = sorted(float(e["ms"]) for e in member_entries)
    member_create_ms = sorted(float(e["ms"]) for e in member_entries if e.get("operation") == "CREATE")
    new_works = sorted(at - run.triggered for at in works.added.values() if at >= run.triggered)
    new_objects = []
    arrived: dict[str, float] = {}  # job -> seconds from the taint to its new object on the target
    for o in outcomes:
        first = next(
            (s.at for s in world.timeline.of((NAMESPACE, o.old.key[1]), target) if s.at >= run.triggered),
            None,
        )
        if first is not None:
            new_objects.append(first - run.triggered)
            arrived[o.old.key[1]] = first - run.triggered
    new_objects.sort()
    # each object's own path: its member-webhook CREATE(s) plus its part of the Work webhook's time, against
    # the seconds from the taint to that object (each admission is on its own object's path once)
    create_by_job: dict[str, float] = {}
    for e in member_entries:
        if e.get("operation") == "CREATE":
            create_by_job[str(e.get("name"))] = create_by_job.get(str(e.get("name")), 0.0) + float(e["ms"])
    work_each = sum(work_ms) / max(1, len(arrived))
    product_path = sum(create_by_job.get(job, 0.0) + work_each for job in arrived) / 1000
    last_object = new_objects[-1] if new_objects else float("nan")
    product_ms = sum(work_ms) + sum(member_create_ms)
    groups = roles(world)
    rss = {
        group: (sum(memory.now.get(n, 0.0) for n in names), sum(memory.peak.get(n, 0.0) for n in names))
        for group, names in groups.items()
    }
    return {
        "jobs": size,
        "source": source,
        "target": target,
        "restored_newest": restored,
        "counted_once": counted_once,
        "two_running_seconds": sum(o.two_running_seconds for o in outcomes),
        "checkpoints_lost": sum(len(o.lost) for o in outcomes),
        "restore_seconds_max": max(o.restore_seconds for o in outcomes),
        "restore_seconds_p50": statistics.median(o.restore_seconds for o in outcomes),
        "phases": run.phases,
        "work_webhook": _stats(work_ms),
        "work_webhook_fresh_reads": sum(
            1
            for e in world.admissions("control-plane", run.since, "Work")
            if any(m.get("bindingFrom") == "api" for m in e.get("manifests") or [])
        ),
        "member_webhook": _stats(member_ms),
        "member_webhook_create": _stats(member_create_ms),
        "taint_to_last_work": new_works[-1] if new_works else float("nan"),
        "taint_to_first_work": new_works[0] if new_works else float("nan"),
        "new_works": len(new_works),
        "taint_to_last_object": last_object,
        "new_objects": len(new_objects),
        "product_ms_summed": product_ms,
        "product_share_upper_bound": product_ms / 1000 / last_object if new_objects else float("nan"),
        "product_seconds_on_paths": product_path,
        "objects_seconds_on_paths": sum(arrived.values()),
        "product_share_per_object": product_path / sum(arrived.values()) if arrived else float("nan"),
        "apiserver_webhook_seconds": {name: _delta(after[name], before[name]) for name in servers},
        "rss_mib": rss,
        "machine_busy": (busy1[0] - busy0[0]) / max(1.0, busy1[1] - busy0[1]),
        "load_peak": memory.load_peak,
        "operator_errors": {c: len(op.errors) for c, op in world.operators.items()},
    }


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": flows.percentile(values, 50),
        "p99": flows.percentile(values, 99),
        "max": values[-1] if values else 0.0,
        "sum": sum(values),
    }


def report(figures: dict[str, Any]) -> str:
    f = figures
    lines = [
        f"jobs {f['jobs']}: restored from the newest checkpoint {f['restored_newest']}, counted once "
        f"{f['counted_once']}, two RUNNING {f['two_running_seconds']:.2f} s in all, checkpoints lost "
        f"{f['checkpoints_lost']}",
        f"restore (taint -> new job RUNNING): p50 {f['restore_seconds_p50']:.1f} s, max "
        f"{f['restore_seconds_max']:.1f} s; phases "
        + ", ".join(f"{k} {v:.1f} s" for k, v in f["phases"].items()),
        "Work webhook (server): n {n}, p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max:.1f} ms, "
        "sum {sum:.0f} ms".format(**f["work_webhook"])
        + f" ({f['work_webhook_fresh_reads']} read the binding fresh)",
        "member webhook (server, all): n {n}, p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max:.1f} ms".format(
            **f["member_webhook"]
        ),
        "member webhook (server, CREATE): n {n}, p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max:.1f} ms, "
        "sum {sum:.0f} ms".format(**f["member_webhook_create"]),
        f"Karmada: taint -> first new Work {f['taint_to_first_work']:.1f} s, last new Work "
        f"{f['taint_to_last_work']:.1f} s ({f['new_works']} Works); taint -> last new object on "
        f"{f['target']} {f['taint_to_last_object']:.1f} s ({f['new_objects']} objects)",
        f"product's share (its webhooks' summed server time / taint -> last object; upper bound): "
        f"{f['product_ms_summed'] / 1000:.1f} s of {f['taint_to_last_object']:.1f} s = "
        f"{100 * f['product_share_upper_bound']:.1f} %",
        f"product's share per object (its webhooks' time on each object's own path / taint -> that object, "
        f"summed over the objects): {f['product_seconds_on_paths']:.1f} s of "
        f"{f['objects_seconds_on_paths']:.0f} s = {100 * f['product_share_per_object']:.2f} %",
    ]
    for server, hooks in f["apiserver_webhook_seconds"].items():
        for hook, (total, count) in sorted(hooks.items()):
            lines.append(
                f"{server} -> webhook {hook}: {count:.0f} calls, {total:.1f} s in all, "
                f"mean {1000 * total / count:.2f} ms (as the API server timed them)"
            )
    lines.append("RSS MiB at the end (peak sampled every 2 s):")
    for group, (now, peak) in sorted(f["rss_mib"].items()):
        lines.append(f"  {group:48s} {now:8.0f} {peak:8.0f}")
    lines.append(
        f"machine busy during the fleet: {100 * f['machine_busy']:.0f} % of both cores; 1-minute load "
        f"average: peak {f['load_peak']:.1f}, at the end {f['load_after'][0]:.1f}"
    )
    return "\n".join(lines)


def _publish(figures: dict[str, Any], path: Path | None) -> None:
    print(report(figures), flush=True)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figures, indent=1, default=str))


class Overtime(Exception):
    pass


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """``Overtime`` raised in the main thread after ``seconds``: every ``with`` it unwinds stops its part."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise Overtime(f"not done within --timeout {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(max(1, int(seconds)))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench karmada_fleet")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--version", default="v1.18.2")
    parser.add_argument("--timeout", type=float, default=3000.0, help="seconds for the whole run")
    parser.add_argument(
        "--poll", type=float, default=0.0, help="fencing poll seconds (default jobs/25, >= 3)"
    )
    parser.add_argument(
        "--buckets",
        type=int,
        default=0,
        help="S3 spread over this many moto servers, the jobs' checkpoints in a bucket each, behind one "
        "router (default jobs/250, 1 to 8)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    from tests.chart.conftest import ensure_binaries
    from tests.e2e.assets import find_assets
    from tests.e2e.conftest import world_for
    from tests.e2e.stack import Tools

    poll = args.poll or max(3.0, round(args.jobs / 25))
    buckets = args.buckets or min(8, max(1, -(-args.jobs // 250)))
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:7.1f} s] {text}", flush=True)

    say(
        f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; fencing {fencing_for(poll)}; "
        f"S3 on {buckets} moto server(s)"
    )
    folder = ensure_binaries()
    tools = Tools(folder / "helm", folder / "kubectl")
    with deadline(args.timeout):
        worlds = world_for(args.version, find_assets(), tools, fencing=fencing_for(poll), buckets=buckets)
        try:
            world = next(worlds)
            say(f"stack up on Karmada {args.version} ({world.stack.folder})")
            figures = measure(world, args.jobs, say)
            figures.update(
                {
                    "version": args.version,
                    "fencing": fencing_for(poll),
                    "s3_servers": buckets,
                    "load_after": os.getloadavg(),
                }
            )
            _publish(figures, args.json)  # before the stack stops: a failing stop loses no figure
            next(worlds, None)  # the stack stopped, its folder removed (FLINK_FAILOVER_E2E_KEEP=1 keeps it)
        except BaseException:
            world_failed = locals().get("world")
            if isinstance(world_failed, World):
                world_failed.failed = True  # its folder (logs) is kept
                say(f"failed; logs kept in {world_failed.stack.folder / 'logs'}")
            raise
        finally:
            worlds.close()  # every process stopped, whatever happened
    say("stack stopped")
    ok = figures["restored_newest"] == args.jobs and figures["counted_once"] == args.jobs
    return 0 if ok and figures["two_running_seconds"] == 0.0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
