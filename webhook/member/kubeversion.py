"""The member cluster's Kubernetes version, which decides whether the keeper's native sidecar can run
(``member/keeper.py``: 1.29+). Read from the API server's ``/version`` in the background when a worker
starts, each try under a deadline, retried until it answers: an admission never waits for it, and one
made while it is not known yet gets no keeper and an Event saying so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.kubeobjects import KubeObjects
from webhook.member.keeper import NATIVE_SIDECARS, version_of

log = logging.getLogger(__name__)

Version = tuple[int, int]


class ClusterVersion:
    """``current()``: (major, minor), or None and why not (yet)."""

    def __init__(
        self,
        config: ClientConfig,
        timeout: float = 5.0,
        retry_seconds: float = 30.0,
        read: Callable[[float], Version | str] | None = None,
    ) -> None:
        self._config = config
        self._timeout = timeout
        self._retry = retry_seconds
        self._read = read or self._ask
        self._lock = threading.Lock()
        self._version: Version | None = None
        self._problem = "not read yet"
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._loop, name="kube-version", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def current(self) -> tuple[Version | None, str]:
        with self._lock:
            return self._version, self._problem

    def _loop(self) -> None:
        while not self._stop.is_set():
            found = self._read(self._timeout)
            with self._lock:
                if isinstance(found, str):
                    self._problem = found
                else:
                    self._version, self._problem = found, ""
            if not isinstance(found, str):
                if found < NATIVE_SIDECARS:
                    log.warning(
                        "no lease keeper on this cluster: Kubernetes %d.%d serves no native sidecars (1.29+)",
                        *found,
                    )
                return
            log.warning("the cluster's Kubernetes version is not known yet: %s", found)
            self._stop.wait(self._retry)

    def _ask(self, timeout: float) -> Version | str:
        api = KubeObjects.connect(self._config, "member cluster")
        if isinstance(api, ApiFailure):
            return api.message
        answer = api.version(timeout=timeout)
        if isinstance(answer, ApiFailure):
            return f"GET /version: {answer.message}"
        return version_of(answer)
