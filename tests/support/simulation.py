"""A simulated world for the product's fencing agents: virtual time, object storage, API servers, Flink
operators and Karmada's failovers, on one event loop.

The agents are the product's own, whole: ``FencingAgent.run`` with its polls, rechecks and heartbeat
loop, its ``Lanes`` (deadlines, dropped calls, the outstanding cap), its records and its plans. What
is simulated is everything they talk to:

- **time**: the event loop's clock is virtual (``VirtualLoop``): when nothing is ready it jumps to the
  next timer, so a 400 s world runs in a fraction of a second and no result depends on machine load;
- **storage** (``Store``): one object store, every object stamped with the storage's own (virtual)
  time; each agent reaches each bucket through its own ``Reach``, which hangs (no answer: the call is
  failed at its deadline, as fsspec's timeout does) or fails calls in drawn windows;
- **API servers** (``ApiServer``): one per member cluster, shared by that cluster's agents (``SimApi``
  is one agent's client, with latency);
- **the Flink operator** (``Operator``): a suspend is a request: the job stays RUNNING by its status for
  the operator's stop delay, then the status says FINISHED; a deletion is one too: the operator's
  finalizer keeps the object (``deletionTimestamp`` set, status RUNNING) while its cleanup stops the job
  for the same delay, then the object goes (``World.delete``); a start takes its own delay; a running job
  completes a checkpoint every ``CHECKPOINT_SECONDS`` into the storage (the job's path is its own: the
  role's faults do not reach it), continuing the ids of the checkpoint it was started from;
- **the failover** (``World.fail_over``): what the new cluster's member webhook does at admission (write
  the fence, list, hold or not, heartbeat), through that webhook's own ``Reach``.

``World.violations`` lists every instant two clusters' jobs were RUNNING by their status at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import logging
import selectors
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.kube import merge_patch
from tests.support.objects import JOB_ID, flink_deployment, flink_metadata
from tests.support.operator import running_status, stopped_status
from webhook.common.kubeclient import ApiFailure
from webhook.common.paths import StoragePath
from webhook.fencing import holdtexts
from webhook.fencing.agent import FencingAgent
from webhook.fencing.lanes import Lanes
from webhook.fencing.layout import Workload
from webhook.fencing.protocol import HoldOutcome, judge_admission
from webhook.fencing.records import fence_name, heartbeat_name, parse_listing
from webhook.policy.restore import RestorePolicy
from webhook.restore.storage.backends import Filesystems
from webhook.restore.storage.search import CheckpointStorage

T0 = datetime(2026, 12, 1, tzinfo=UTC)
P = "flink-failover.io"
TICK = 0.25  # how often the operators look at their objects
START_SECONDS = 2.0  # an operator takes this long to start a job
CHECKPOINT_SECONDS = 2.0  # a running job completes a checkpoint this often
LATENCY = 0.02  # a storage or API call that answers, answers after this long
FINALIZER = "flinkdeployments.flink.apache.org/finalizer"  # the operator's, on every object it reconciles


def at(seconds: float) -> datetime:
    """Virtual seconds as the storage's (and every machine's) time: the world has one clock."""
    return T0 + timedelta(seconds=seconds)


# --- time ------------------------------------------------------------------------------------------


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self, loop: VirtualLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout > 0:
            self._loop.now += timeout  # nothing is ready: jump to the next timer
        return super().select(0)


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time. Nothing in the world runs on a thread, so it is deterministic."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self.now


# --- storage ---------------------------------------------------------------------------------------


@dataclass
class Store:
    """The object store: fs path (``bucket/key``) -> (bytes, storage time written); ``writes`` keeps
    every write's storage time per path (a heartbeat's renewals)."""

    loop: VirtualLoop
    files: dict[str, tuple[bytes, float]] = field(default_factory=dict)
    writes: dict[str, list[float]] = field(default_factory=dict)

    def put(self, path: str, data: bytes) -> None:
        self.files[path] = (data, self.loop.now)
        self.writes.setdefault(path, []).append(self.loop.now)


class SimFileSystem:
    """The fsspec calls the product makes, answered from the ``Store`` at once (the ``Reach`` decides
    when, and whether, a call is answered at all)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _below(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return [p for p in self.store.files if p.startswith(prefix)]

    def ls(self, path: str, detail: bool = True, **_: Any) -> list[Any]:
        path = path.rstrip("/")
        below = self._below(path)
        if not below:
            if path in self.store.files:
                return [self.info(path)] if detail else [path]
            raise FileNotFoundError(path)
        names: dict[str, str] = {}
        for p in below:
            rest = p[len(path) + 1 :]
            head = rest.split("/", 1)[0]
            names[f"{path}/{head}"] = "file" if "/" not in rest else "directory"
        if not detail:
            return sorted(names)
        return [
            self.info(n) if t == "file" else {"name": n, "type": "directory", "size": 0}
            for n, t in sorted(names.items())
        ]

    def find(self, path: str, detail: bool = False, **_: Any) -> Any:
        below = sorted(self._below(path))
        return {p: self.info(p) for p in below} if detail else below

    def info(self, path: str, **_: Any) -> dict[str, Any]:
        path = path.rstrip("/")
        found = self.store.files.get(path)
        if found is not None:
            return {"name": path, "type": "file", "size": len(found[0]), "mtime": at(found[1])}
        if self._below(path):
            return {"name": path, "type": "directory", "size": 0}
        raise FileNotFoundError(path)

    def isdir(self, path: str) -> bool:
        return bool(self._below(path.rstrip("/")))

    def isfile(self, path: str) -> bool:
        return path.rstrip("/") in self.store.files

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **_: Any) -> bytes:
        found = self.store.files.get(path.rstrip("/"))
        if found is None:
            raise FileNotFoundError(path)
        return found[0][start:end]

    def pipe_file(self, path: str, data: bytes, **_: Any) -> None:
        self.store.put(path, data)

    def rm_file(self, path: str, **_: Any) -> None:
        if self.store.files.pop(path.rstrip("/"), None) is None:
            raise FileNotFoundError(path)

    def makedirs(self, path: str, exist_ok: bool = True) -> None:
        return None


class SimFilesystems(Filesystems):
    def __init__(self, store: Store) -> None:
        super().__init__({})
        self.store = store

    def filesystem(self, path: StoragePath, lane: str = "", connections: int = 0) -> Any:
        return SimFileSystem(self.store)  # one store, whichever lane's instance


class SimStorage(CheckpointStorage):
    def __init__(self, store: Store) -> None:
        super().__init__(filesystems=SimFilesystems(store))
        self.store = store


@dataclass(frozen=True)
class Fault:
    start: float
    end: float
    kind: str = "hang"  # hang: no answer (failed at the caller's deadline); fail: an error at once
    bucket: str = ""  # "" : every bucket


@dataclass
class Reach:
    """How one agent (or one webhook) reaches the storage: faults by bucket and time."""

    loop: VirtualLoop
    faults: list[Fault] = field(default_factory=list)
    latency: float = LATENCY
    # each call's own latency, when given: calls then answer out of order, as a lane's threads do
    latencies: Iterator[float] | None = None

    def delay(self) -> float:
        return self.latency if self.latencies is None else next(self.latencies)

    def fault(self, lane: str) -> str:
        bucket = lane.split(" ", 1)[0].split("://", 1)[-1].split("/", 1)[0]  # "s3://b heartbeats": b
        now = self.loop.now
        for f in self.faults:
            if f.start <= now < f.end and f.bucket in ("", bucket):
                return f.kind
        return ""


class SimExecutor(concurrent.futures.Executor):
    """One lane's calls on the simulated storage: answered after the latency, never (a hang: the lane's
    caller fails it at its deadline and drops it), or with an error."""

    def __init__(self, loop: VirtualLoop, reach: Reach, lane: str) -> None:
        self.loop, self.reach, self.lane = loop, reach, lane

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if self.reach.fault(self.lane) == "hang":
            return future

        def answer() -> None:
            if not future.set_running_or_notify_cancel():
                return
            if self.reach.fault(self.lane) == "fail":
                future.set_exception(OSError("connection reset by peer"))
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the caller, as a pool's thread would
                future.set_exception(exc)

        self.loop.call_later(self.reach.delay(), answer)
        return future


# --- API servers ------------------------------------------------------------------------------------

Key = tuple[str, str, str]  # kind, namespace, name


@dataclass
class ApiServer:
    """One member cluster's API server: its Flink objects."""

    loop: VirtualLoop
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    patches: list[tuple[float, str, Key, dict[str, Any]]] = field(default_factory=list)  # time, by, key, body

    def put(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{meta['name']}-{len(self.patches)}-{self.loop.now}")
        self.objects[(obj["kind"], meta["namespace"], meta["name"])] = obj

    def get(
        self, name: str, kind: str = "FlinkDeployment", namespace: str = "analytics"
    ) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))


@dataclass
class SimApi:
    """One agent's client of its cluster's API server (``MemberApi``); ``down`` windows fail every call."""

    server: ApiServer
    agent: str
    down: list[Fault] = field(default_factory=list)
    latency: float = LATENCY

    def _down(self) -> bool:
        now = self.server.loop.now
        return any(f.start <= now < f.end for f in self.down)

    async def list_kind(self, kind: str) -> list[dict[str, Any]] | ApiFailure:
        await asyncio.sleep(self.latency)
        if self._down():
            return ApiFailure(0, "connection refused")
        return [copy.deepcopy(o) for (k, _, _), o in sorted(self.server.objects.items()) if k == kind]

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | ApiFailure | None:
        await asyncio.sleep(self.latency)
        if self._down():
            return ApiFailure(0, "connection refused")
        found = self.server.objects.get((kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        body: dict[str, Any],
        timeout: float | None = None,
        stops: bool = False,
    ) -> dict[str, Any] | ApiFailure:
        await asyncio.sleep(self.latency)
        if self._down():
            return ApiFailure(0, "connection refused")
        key = (kind, namespace, name)
        current = self.server.objects.get(key)
        if current is None:
            return ApiFailure(404, "not found")
        self.server.objects[key] = merge_patch(current, body)
        self.server.patches.append((self.server.loop.now, self.agent, key, copy.deepcopy(body)))
        return copy.deepcopy(self.server.objects[key])


# --- the Flink operator -------------------------------------------------------------------------------


@dataclass
class Job:
    cluster: str
    key: Key
    job_dir: str  # fs path of its chk-<N> (every job of a workload continues in one, here)
    started: float
    started_from: str
    ended: float | None = None
    checkpoints: list[tuple[int, float]] = field(default_factory=list)  # (id, storage time)

    def last(self) -> int:
        if self.checkpoints:
            return self.checkpoints[-1][0]
        name = self.started_from.rstrip("/").rsplit("/", 1)[-1]
        return int(name[4:]) if name.startswith("chk-") and name[4:].isdigit() else 0


@dataclass
class Operator:
    """One cluster's Flink operator: every ``TICK`` it moves each job towards its spec, after a delay."""

    world: World
    cluster: str
    stop_delay: float
    asked: dict[Key, float] = field(default_factory=dict)
    current: dict[Key, Job] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            self.step()
            self.world.check()
            await asyncio.sleep(TICK)

    def step(self) -> None:
        now = self.world.loop.now
        server = self.world.clusters[self.cluster].server
        for key in [k for k in self.current if k not in server.objects]:  # removed outright: the job goes
            self.current.pop(key).ended = now
        for key, obj in list(server.objects.items()):
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                self._clean_up(key)
                continue
            if FINALIZER not in meta.setdefault("finalizers", []):
                meta["finalizers"].append(FINALIZER)  # as the operator does on its first reconcile
            desired = obj["spec"]["job"].get("state", "running")
            job = self.current.get(key)
            if (desired == "suspended") == (job is None):
                self.asked.pop(key, None)  # as asked already
                continue
            asked = self.asked.setdefault(key, now)
            if job is not None and now - asked >= self.stop_delay:
                job.ended = now
                del self.current[key]
                self.asked.pop(key)
                obj["status"] = stopped_status(obj)
            elif job is None and now - asked >= START_SECONDS:
                self.asked.pop(key)
                path = str(obj["spec"]["job"].get("initialSavepointPath") or "")
                started = Job(self.cluster, key, self.world.job_dirs[key[2]], now, path)
                self.current[key] = started
                self.world.jobs.append(started)
                obj["status"] = running_status(JOB_ID, obj["spec"])
        for job in self.current.values():
            last_at = job.checkpoints[-1][1] if job.checkpoints else job.started
            if now - last_at >= CHECKPOINT_SECONDS:
                self.world.write_checkpoint(job, job.last() + 1)

    def _clean_up(self, key: Key) -> None:
        """A deleted object: its job is stopped (the stop delay, as a suspend), then the finalizer goes
        and with it the object. The status keeps saying RUNNING until then."""
        now = self.world.loop.now
        server = self.world.clusters[self.cluster].server
        job = self.current.get(key)
        if job is not None:
            if now - self.asked.setdefault(key, now) < self.stop_delay:
                return
            job.ended = now
            del self.current[key]
        self.asked.pop(key, None)
        del server.objects[key]

    def adopt(self, key: Key, checkpoint: int) -> Job:
        """A job that has run for long when the world starts."""
        now = self.world.loop.now
        job = Job(self.cluster, key, self.world.job_dirs[key[2]], now, "", checkpoints=[(checkpoint, now)])
        self.current[key] = job
        self.world.jobs.append(job)
        return job


# --- clusters, agents, the world ---------------------------------------------------------------------


@dataclass
class Replica:
    """One member role replica: its agent, how it reaches the storage and its API server."""

    name: str
    reach: Reach
    api: SimApi
    agent: FencingAgent | None = None
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event | None = None


@dataclass
class Cluster:
    name: str
    server: ApiServer
    operator: Operator
    replicas: list[Replica] = field(default_factory=list)
    webhook: Reach | None = None  # how its member webhook reaches the storage at admission


@dataclass
class World:
    policy: RestorePolicy
    loop: VirtualLoop = field(default_factory=VirtualLoop)
    clusters: dict[str, Cluster] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)
    violations: list[tuple[float, list[str]]] = field(default_factory=list)
    job_dirs: dict[str, str] = field(default_factory=dict)  # workload name -> its jobs' chk-<N> folder
    store: Store = field(init=False)

    def __post_init__(self) -> None:
        self.store = Store(self.loop)

    # --- building it ---------------------------------------------------------------------------------
    def cluster(self, name: str, stop_delay: float, webhook_faults: list[Fault] | None = None) -> Cluster:
        server = ApiServer(self.loop)
        made = Cluster(
            name, server, Operator(self, name, stop_delay), webhook=Reach(self.loop, webhook_faults or [])
        )
        self.clusters[name] = made
        return made

    def replica(
        self, cluster: str, faults: list[Fault] | None = None, api_down: list[Fault] | None = None
    ) -> Replica:
        found = self.clusters[cluster]
        name = f"{cluster}-{len(found.replicas)}"
        replica = Replica(name, Reach(self.loop, faults or []), SimApi(found.server, name, api_down or []))
        found.replicas.append(replica)
        return replica

    def start(self, replica: Replica, cluster: str) -> None:
        """(Re)start a replica's agent: a new process, knowing nothing of its predecessor."""
        reach = replica.reach
        lanes = Lanes(
            self.policy.fencing.call_timeout,
            executors=lambda lane: SimExecutor(self.loop, reach, lane),
            clock=self.loop.time,
        )
        agent = FencingAgent(
            cluster,
            self.policy,
            replica.api,
            SimStorage(self.store),
            clock=lambda: at(self.loop.now),
            lanes=lanes,
        )
        replica.agent, replica.stop = agent, asyncio.Event()
        replica.task = self.loop.create_task(agent.run(replica.stop))

    def kill(self, replica: Replica) -> None:
        """SIGKILL: its loops end at once, what it had in flight is lost."""
        if replica.task is not None:
            replica.task.cancel()
        replica.task = replica.agent = None

    # --- the job -------------------------------------------------------------------------------------
    root: str = "s3://jobs/checkpoints"

    def write_checkpoint(self, job: Job, n: int) -> None:
        self.store.put(f"{job.job_dir}/chk-{n}/_metadata", flink_metadata(n))
        job.checkpoints.append((n, self.loop.now))

    def newest_checkpoint(self, name: str = "orders") -> int:
        folder = self.job_dirs[name] + "/chk-"
        return max(
            (int(p[len(folder) :].split("/")[0]) for p in self.store.files if p.startswith(folder)), default=0
        )

    def running(self, name: str = "orders") -> list[str]:
        return sorted({j.cluster for j in self.jobs if j.ended is None and j.key[2] == name})

    def check(self) -> None:
        for name in self.job_dirs:
            running = self.running(name)
            if len(running) > 1:
                self.violations.append((self.loop.now, running))

    def describe(self, name: str = "orders") -> str:
        """What each cluster's object and the records say (a failing assertion's message)."""
        lines = [f"t={self.loop.now:.2f} running={self.running(name)}"]
        for c in self.clusters.values():
            obj = c.server.get(name)
            if obj is None:
                continue
            notes = {k.rsplit("/", 1)[-1]: v for k, v in (obj["metadata"].get("annotations") or {}).items()}
            lines.append(
                f"  {c.name}: state={obj['spec']['job'].get('state')} labels={obj['metadata'].get('labels')} "
                f"status={(obj.get('status') or {}).get('jobStatus')} {notes}"
            )
        folder = self.folder(name)
        for path, (_, t) in sorted(self.store.files.items()):
            if path.startswith(folder + "/"):
                lines.append(f"  {path.rsplit('/', 1)[-1]} @ {t:.2f}")
        lines += [
            f"  job {j.cluster} {j.started:.2f}-{j.ended} from {j.started_from[-6:]}" for j in self.jobs
        ]
        return "\n".join(lines)

    def lost_checkpoints(self, name: str = "orders") -> list[int]:
        """Checkpoints an earlier job of the workload completed past the one a later job started from."""
        mine = sorted((j for j in self.jobs if j.key[2] == name), key=lambda j: j.started)
        lost: set[int] = set()
        for i, later in enumerate(mine):
            if "/chk-" not in later.started_from:
                continue
            start = int(later.started_from.rsplit("/chk-", 1)[1])
            lost |= {n for earlier in mine[:i] for n, _ in earlier.checkpoints if n > start}
        return sorted(lost)

    # --- what Karmada and the member webhooks do ------------------------------------------------------
    def running_copy(self, cluster: str, name: str = "orders", root: str = "", checkpoints: int = 3) -> None:
        """``cluster`` runs the workload's job (it has for long, heartbeating: its heartbeat is stored)."""
        base = root or self.root
        obj = flink_deployment(name=name, checkpoint_dir=base)
        obj["spec"]["job"]["state"] = "running"
        obj["spec"]["job"]["upgradeMode"] = "savepoint"
        obj["status"] = running_status(JOB_ID, obj["spec"])
        found = self.clusters[cluster]
        found.server.put(obj)
        self.job_dirs[name] = f"{base.removeprefix('s3://')}/{JOB_ID}"
        for n in range(1, checkpoints + 1):
            self.store.put(f"{self.job_dirs[name]}/chk-{n}/_metadata", flink_metadata(n))
        found.operator.adopt(("FlinkDeployment", "analytics", name), checkpoints)
        self.store.put(f"{self.folder(name, base)}/{heartbeat_name(cluster)}", b"{}")

    def delete(self, cluster: str, name: str = "orders") -> None:
        """``kubectl delete`` (or Karmada's purge ``Directly``): an object with the operator's finalizer
        is only marked; the operator removes it once its job has stopped."""
        server = self.clusters[cluster].server
        key = ("FlinkDeployment", "analytics", name)
        obj = server.objects.get(key)
        if obj is None:
            return
        if obj["metadata"].get("finalizers"):
            obj["metadata"].setdefault("deletionTimestamp", at(self.loop.now).strftime("%Y-%m-%dT%H:%M:%SZ"))
        else:
            del server.objects[key]

    def folder(self, name: str = "orders", root: str = "") -> str:
        """Where the workload's ownership records are (fs path)."""
        workload = Workload("FlinkDeployment", "analytics", name)
        return workload.folder(StoragePath.parse(root or self.root)).fs_path

    def fail_over(self, target: str, epoch: int, source: str, name: str = "orders", root: str = "") -> bool:
        """Karmada creates the workload on ``target``; its webhook writes the fence and lists (as the
        gate does, through its own reach), and holds or not. True when it was admitted held."""
        base = root or self.root
        self.job_dirs.setdefault(name, f"{base.removeprefix('s3://')}/{JOB_ID}")
        obj = flink_deployment(
            name=name,
            checkpoint_dir=base,
            labels={f"{P}/failover": "true", f"{P}/job-id": JOB_ID},
            annotations={
                f"{P}/failover-count": str(epoch),
                f"{P}/source-cluster": source,
                f"{P}/restore-decision": "restored",
                f"{P}/epoch": str(epoch),
            },
        )
        obj["spec"]["job"]["state"] = "running"
        obj["spec"]["job"]["initialSavepointPath"] = f"{base}/{JOB_ID}/chk-{self.newest_checkpoint(name)}"
        found = self.clusters[target]
        assert found.webhook is not None
        folder = self.folder(name, base)
        held = True
        if not found.webhook.fault("s3://" + folder.split("/", 1)[0]):
            self.store.put(f"{folder}/{fence_name(epoch, target)}", b"{}")
            entries = [
                {"name": p, "type": "file", "mtime": at(t)}
                for p, (_, t) in self.store.files.items()
                if p.startswith(folder + "/")
            ]
            ownership = parse_listing(entries).ownership
            verdict = judge_admission(target, epoch, ownership, self.policy.fencing.lease_seconds)
            held = verdict.outcome is not HoldOutcome.RELEASE
            if not held:
                self.store.put(f"{folder}/{heartbeat_name(target)}", b"{}")
        if held:  # a hold, or the records unusable (onStorageError: hold)
            obj["spec"]["job"]["state"] = "suspended"
            obj["metadata"]["annotations"][f"{P}/hold"] = holdtexts.storage_text(epoch, "admitted held")
            obj["metadata"]["annotations"][f"{P}/restore-decision"] = "held"
        found.server.put(obj)
        return held

    # --- running it ----------------------------------------------------------------------------------
    def run(self, until: float, events: Sequence[tuple[float, Callable[[], object]]] = ()) -> None:
        """Start the operators, play ``events`` (replicas started, killed, failovers) at their times, and
        run the world to ``until``."""
        loop = self.loop

        async def main() -> None:
            operators = [loop.create_task(c.operator.run()) for c in self.clusters.values()]
            for when, event in sorted(events, key=lambda e: e[0]):
                loop.call_at(when, event)
            await asyncio.sleep(until - loop.now)
            for task in operators:
                task.cancel()
            # The end of the world: every replica and what it has in flight.
            while pending := asyncio.all_tasks() - {asyncio.current_task()}:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)

        with quiet():
            loop.run_until_complete(main())

    def close(self) -> None:
        self.loop.close()


@contextmanager
def quiet() -> Iterator[None]:
    """The agents log every decision; thousands of simulated polls are not worth keeping."""
    logger = logging.getLogger("webhook")
    before = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(before)
