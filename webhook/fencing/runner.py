"""Run the fencing agent in exactly one gunicorn worker of the member role.

Every worker starts a thread that waits for an exclusive lock on one file in the server's metrics
directory (set before the workers fork); the holder runs the agent on an event loop of its own in that
thread. When that worker exits, the kernel drops its lock and another worker's thread takes over within
one poll. Each replica of the member role runs one agent; two agents of one cluster make the same
idempotent writes and patches, and the property test (``tests/fencing/test_interleavings.py``)
runs them together under every interleaving drawn.

The agent's health goes to a file beside the lock after every poll, so every worker's webhook knows
whether the agent can vouch for a restore (``vouches``): a restore it cannot vouch for (the agent cannot
build its client, cannot list that kind or has not polled within a lease) is admitted held with the
reason. The agent's health does not make the webhook unready: with ``failurePolicy: Fail`` that would
block every failed-over Flink object in the cluster whenever the agent is in trouble.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import socket
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

from webhook.common.events import EventRecorder
from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.kubeobjects import EVENTS, KubeObjects
from webhook.fencing.agent import FencingAgent
from webhook.fencing.flinkapi import FlinkApi, ThreadedApi, stops_client
from webhook.fencing.lanes import process_lanes
from webhook.fencing.report import Health
from webhook.policy.restore import RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

log = logging.getLogger(__name__)

CONTROLLER = "flink-failover.io/member"  # the Events' reportingController


@dataclass(frozen=True)
class AgentOptions:
    cluster: str
    kubeconfig: str | None
    context: str | None


def lock_path() -> str:
    base = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.gettempdir()
    return os.path.join(base, f"fencing-agent-{os.getppid()}.lock")


def health_path() -> str:
    return lock_path().removesuffix(".lock") + ".health.json"


def write_health(health: Health, path: str | None = None) -> None:
    """Atomically: a worker's /readyz never reads half a file."""
    target = path or health_path()
    temporary = f"{target}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as out:
        json.dump(asdict(health), out)
    os.replace(temporary, target)


def vouches(kind: str, lease_seconds: float, path: str | None = None, now: float | None = None) -> str | None:
    """None when this replica's agent fences objects of ``kind`` now, else why not (the webhook then
    admits a restore held, with this reason: nothing here could release it or stop it again)."""
    try:
        with open(path or health_path(), encoding="utf-8") as found:
            health = json.load(found)
    except FileNotFoundError:
        return "the fencing agent has not completed a poll yet"
    except (OSError, ValueError) as exc:
        return f"the fencing agent's health is unreadable: {exc}"
    if not health.get("ready"):
        return f"the fencing agent is not ready: {health.get('reason') or 'not ready'}"
    age = (time.time() if now is None else now) - float(health.get("polled_at") or 0)
    if age > lease_seconds:
        return f"the fencing agent has not polled for {age:.0f}s (lease {lease_seconds:g}s)"
    listed = (health.get("kinds") or {}).get(kind, "ok")
    if listed != "ok":
        return f"the fencing agent cannot watch {kind}: {listed}"
    return None


def recorder(client: ClientConfig | KubeObjects, cluster: str) -> EventRecorder | None:
    """Kubernetes Events written to the member cluster, through ``client`` (a connected one is reused;
    None when no client can be built: said once)."""
    objects = KubeObjects.connect(client, "member cluster") if isinstance(client, ClientConfig) else client
    if isinstance(objects, ApiFailure):
        log.warning("no Kubernetes Events: %s", objects.message)
        return None
    instance = f"{cluster or 'member'}/{socket.gethostname()}"
    return EventRecorder(
        lambda namespace, body: objects.create(EVENTS, namespace, body),
        lambda namespace, name, body: objects.merge_patch(EVENTS, namespace, name, body),
        CONTROLLER,
        instance,
    )


def start(
    options: AgentOptions, policy: RestorePolicy, stop: threading.Event | None = None
) -> threading.Event:
    """Start the waiting thread; set the returned event to stop it."""
    stop = stop or threading.Event()
    thread = threading.Thread(
        target=_wait_then_run, args=(options, policy, stop, lock_path()), name="fencing-agent", daemon=True
    )
    thread.start()
    return stop


def _wait_then_run(options: AgentOptions, policy: RestorePolicy, stop: threading.Event, path: str) -> None:
    with open(path, "a+b") as lock:  # the lock lives as long as the file is open
        while not stop.is_set():
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                stop.wait(policy.fencing.poll_seconds)
        if stop.is_set():
            return
        while not stop.is_set():
            config = ClientConfig(options.kubeconfig, options.context)
            api = FlinkApi.connect(config)
            if isinstance(api, ApiFailure):
                log.error("fencing agent cannot build its client", extra={"fields": {"error": api.message}})
                write_health(Health(False, f"cannot build its Kubernetes client: {api.message}", 0.0))
                stop.wait(policy.fencing.poll_seconds)
                continue
            storage = CheckpointStorage(policy.storage_options, write_verdicts=True)  # restore/verdict.py
            events = recorder(api.objects, options.cluster)
            calls = ThreadedApi(api, policy.fencing.call_timeout, stops=stops_client(config))
            lanes = process_lanes(policy.fencing.call_timeout)
            agent = FencingAgent(
                options.cluster, policy, calls, storage, on_health=write_health, events=events, lanes=lanes
            )
            try:
                run_agent(agent, stop)
            finally:
                calls.close()
                if events is not None:
                    events.close()


def run_agent(agent: FencingAgent, stop: threading.Event) -> None:
    """The agent's loops on an event loop of this thread's own, until ``stop`` is set."""
    asyncio.run(_until(agent, stop))


async def _until(agent: FencingAgent, stop: threading.Event) -> None:
    """The agent's loops until ``stop`` (a thread's event) is set."""
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    waiter = threading.Thread(target=lambda: (stop.wait(), loop.call_soon_threadsafe(done.set)), daemon=True)
    waiter.start()
    await agent.run(done)
