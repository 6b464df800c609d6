"""One capture component in-process (API client, cache, watch thread) against the fake API server."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.controlplane import fakeapi
from tests.controlplane import support as s
from tests.support.production import wait_for
from webhook.common.kubeclient import Backoff, ClientConfig
from webhook.controlplane.karmada import KarmadaApi
from webhook.controlplane.lookup import BindingCache
from webhook.controlplane.record import BindingRecord
from webhook.controlplane.watch import Watcher

KEY = "flink-failover.io/last-known-state"
NS, NAME = "analytics", "orders-flinkdeployment"


class Loop:
    """One capture component: its own API client, cache and thread, as a process would have."""

    def __init__(
        self,
        server: fakeapi.RunningFake,
        tmp_path: Path,
        clock_offset: timedelta = timedelta(),
        **config: Any,
    ) -> None:
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        options = {
            "kubeconfig": str(kubeconfig),
            "request_timeout": 5.0,
            "watch_timeout": 1,
            "watch_read_timeout": 10.0,
        }
        api = KarmadaApi.connect(ClientConfig(**{**options, **config}))
        assert isinstance(api, KarmadaApi)
        self.api = api
        self.cache = BindingCache()
        ticks = itertools.count()
        self.watcher = Watcher(
            api,
            self.cache,
            KEY,
            clock=lambda: s.FIXED_NOW + clock_offset + timedelta(seconds=next(ticks)),
            backoff=Backoff(initial=0.01, maximum=0.05),
        )
        self.thread = threading.Thread(target=self.watcher.run, daemon=True)
        self.server = server

    def __enter__(self) -> Loop:
        self.thread.start()
        assert wait_for(lambda: self.cache.synced, 20)
        return self

    def __exit__(self, *exc: object) -> None:
        self.watcher.stop.set()
        self.server.fake.end_watches()  # a blocked stream read returns; the loop sees stop
        self.thread.join(20)
        assert not self.thread.is_alive()

    def settled(self) -> bool:
        """The loop has handled every event the server has, and persisted every record it decided on: a
        patch waiting or in flight is not caught up (its echo comes after it lands)."""
        cached = self.cache.keys()  # a set (BindingCache is no mapping)
        pending = any(self.watcher.writer.unsettled(key) for key in cached)
        behind = any(not entry.persisted for entry in map(lambda k: self.cache.get(*k), cached) if entry)
        return not (pending or behind) and self.watcher.resource_version == str(self.server.fake.rv)

    def caught_up(self) -> bool:
        """Waits until ``settled`` (no timing assumptions)."""
        return self.server.fake.wait_for(self.settled)

    def record(self, namespace: str = NS, name: str = NAME) -> BindingRecord:
        raw = self.server.fake.annotation(namespace, name, KEY)
        assert raw is not None, "no record persisted"
        parsed = BindingRecord.loads(raw)
        assert isinstance(parsed, BindingRecord), parsed
        return parsed
