"""Run the fencing agent in exactly one gunicorn worker of the member role.

Every worker starts a thread that waits for an exclusive lock on one file in the server's metrics
directory (set before the workers fork); the holder runs the agent. When that worker exits, the kernel
drops its lock and another worker's thread takes over within one poll. Two replicas of the member role
each run one agent: they write the same heartbeat and make the same patches, which is harmless.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import threading
from dataclasses import dataclass

from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.member.fencing.agent import FencingAgent
from webhook.member.fencing.flinkapi import FlinkApi
from webhook.member.policy import RestorePolicy
from webhook.member.storage import CheckpointStorage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentOptions:
    cluster: str
    kubeconfig: str | None
    context: str | None


def lock_path() -> str:
    base = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.gettempdir()
    return os.path.join(base, f"fencing-agent-{os.getppid()}.lock")


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
            api = FlinkApi.connect(ClientConfig(options.kubeconfig, options.context))
            if isinstance(api, ApiFailure):
                log.error("fencing agent cannot build its client", extra={"fields": {"error": api.message}})
                stop.wait(policy.fencing.poll_seconds)
                continue
            agent = FencingAgent(options.cluster, policy, api, CheckpointStorage(policy.storage_options))
            agent.run(stop)
