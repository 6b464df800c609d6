"""The member cluster's Flink objects and Events, as the fencing agent, ``status`` and ``release`` see them.

A thin typed facade over ``common.kubeobjects.KubeObjects`` (every call with a deadline, failures as
values): list one kind, get, merge-patch, and the client the Event recorder writes through;
``ThreadedApi`` is the same for the agent's event loop (``MemberApi``), with the patches that stop a job
(step-downs, stops of stale copies) on threads and connections of their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from webhook.common.flink import BLUE_GREEN
from webhook.common.flinkresources import PLURALS as PLURALS
from webhook.common.flinkresources import RESOURCES
from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.kubeobjects import KubeObjects

T = TypeVar("T")

OPTIONAL_KINDS = (BLUE_GREEN,)  # operator 1.14+: a cluster without its CRD is usual, not a fault

API_THREADS = 4  # lists, gets, hold rewrites, releases, resumes, supersedes
# Step-downs and stops: a fleet of 500 copies stepped down at once at 100 ms a patch takes 500 x 0.1 / 32
# = 1.6 s, within a step-down's own deadline (a poll less a fifth: 4 s); on 4 shared threads it took 12.5 s.
STOP_THREADS = 32


class FlinkApi:
    def __init__(self, objects: KubeObjects) -> None:
        self.objects = objects

    @classmethod
    def connect(cls, config: ClientConfig) -> FlinkApi | ApiFailure:
        objects = KubeObjects.connect(config, "member cluster")
        return objects if isinstance(objects, ApiFailure) else cls(objects)

    def list_kind(self, kind: str) -> list[Mapping[str, Any]] | ApiFailure:
        """Every object of one kind in the cluster, each with its ``kind`` set. Each kind is listed on
        its own: a cluster without the FlinkSessionJob CRD (404) still has its FlinkDeployments fenced."""
        listed = self.objects.list(RESOURCES[kind])
        if isinstance(listed, ApiFailure):
            return listed
        return [{**item, "kind": kind} for item in listed.items]

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | ApiFailure | None:
        return self.objects.get(RESOURCES[kind], namespace, name)

    def patch(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any]
    ) -> Mapping[str, Any] | ApiFailure:
        return self.objects.merge_patch(RESOURCES[kind], namespace, name, body)


def stops_client(config: ClientConfig) -> FlinkApi | None:
    """The stops' own client of the member cluster: a connection per stop thread (None: it cannot be
    built, and the stops share the other client)."""
    api = FlinkApi.connect(replace(config, connections=STOP_THREADS))
    return api if isinstance(api, FlinkApi) else None


class MemberApi(Protocol):
    """What the fencing agent awaits of its cluster's API server (each call answered by its deadline)."""

    async def list_kind(self, kind: str) -> list[Mapping[str, Any]] | ApiFailure: ...

    async def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | ApiFailure | None: ...

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        timeout: float | None = None,
        stops: bool = False,
    ) -> Mapping[str, Any] | ApiFailure:
        """``stops``: the patch stops a running job (a step-down, a stale copy's stop): it must not
        wait behind the other calls."""
        ...


class ThreadedApi:
    """:class:`FlinkApi` (blocking) on two small pools of its own, for the agent's event loop: a call not
    answered by its deadline is a failure (``status`` 0) at the deadline; one still queued then is
    dropped, one already sent finishes on its thread under the client's own request timeout.

    The patches that stop a job run on ``STOP_THREADS`` threads of their own, through ``stops`` (a client
    with as many connections, ``stops_client``), never queued behind lists, gets or hold rewrites."""

    def __init__(
        self,
        api: FlinkApi,
        timeout: float,
        threads: int = API_THREADS,
        stops: FlinkApi | None = None,
        stop_threads: int = STOP_THREADS,
    ) -> None:
        self.api = api
        self.stops = stops or api
        self.timeout = timeout
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="fencing-api")
        self._stop_pool = concurrent.futures.ThreadPoolExecutor(
            stop_threads, thread_name_prefix="fencing-stop"
        )

    async def list_kind(self, kind: str) -> list[Mapping[str, Any]] | ApiFailure:
        return await self._call(self.timeout, self.api.list_kind, kind)

    async def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | ApiFailure | None:
        return await self._call(self.timeout, self.api.get, kind, namespace, name)

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        timeout: float | None = None,
        stops: bool = False,
    ) -> Mapping[str, Any] | ApiFailure:
        seconds = self.timeout if timeout is None else timeout
        if stops:
            return await self._call(
                seconds, self.stops.patch, kind, namespace, name, body, pool=self._stop_pool
            )
        return await self._call(seconds, self.api.patch, kind, namespace, name, body)

    async def _call(
        self,
        timeout: float,
        fn: Callable[..., T],
        *args: Any,
        pool: concurrent.futures.ThreadPoolExecutor | None = None,
    ) -> T | ApiFailure:
        future = (pool or self._pool).submit(fn, *args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), max(timeout, 0.001))
        except TimeoutError:
            return ApiFailure(0, f"no answer from the member cluster's API server within {timeout:g}s")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._stop_pool.shutdown(wait=False, cancel_futures=True)
