"""List, then watch, one resource on one API server into a local cache, with each change time-stamped.

What client-go's informer does, as much as the tier needs: the operator doubles react to it, the
samplers record from it what the API server said and when. A watch that ends or fails is resumed from
the last resource version; a 410 (expired) lists again.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.rest import ApiError, Rest

Key = tuple[str, str]
Handler = Callable[[str, dict[str, Any], float], None]  # (event type, object, monotonic time seen)


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


@dataclass
class Informer:
    api: Rest
    path: str  # a collection, e.g. /apis/flink.apache.org/v1beta1/flinkdeployments
    name: str = "informer"
    handlers: list[Handler] = field(default_factory=list)
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    synced: threading.Event = field(default_factory=threading.Event)
    lock: threading.Condition = field(default_factory=threading.Condition)
    _halt: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _conn: http.client.HTTPSConnection | None = None  # the watch being read

    def start(self) -> Informer:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if not self.synced.wait(60):
            raise TimeoutError(f"{self.name}: {self.path} not listed within 60 s")
        return self

    def halt(self) -> None:
        """Asks the thread to end and ends the watch it reads (a watch with nothing to say blocks until
        the server's timeout, 30 s): several informers are halted at once, then joined."""
        self._halt.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self.halt()
        if self._thread is not None:
            self._thread.join(15)

    def snapshot(self) -> dict[Key, dict[str, Any]]:
        with self.lock:
            return dict(self.objects)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self.objects.get((namespace, name))

    def wait(self, predicate: Callable[[dict[Key, dict[str, Any]]], bool], timeout: float) -> bool:
        """Until ``predicate`` holds for the cache (checked at every change), or the timeout."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not predicate(self.objects):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, 1.0))
        return True

    def _run(self) -> None:
        version = ""
        while not self._halt.is_set():
            try:
                if not version:
                    version = self._list()
                version = self._watch(version)
            except ApiError as exc:
                if exc.status == 410:
                    version = ""
                else:
                    self._halt.wait(0.5)
            except (OSError, http.client.HTTPException, ValueError):
                # a watch cut short (by ``halt`` among others) ends mid-chunk or mid-line
                self._halt.wait(0.5)

    def _list(self) -> str:
        answer = self.api.get(self.path)
        now = time.monotonic()
        fresh = {key_of(item): item for item in answer.get("items") or []}
        with self.lock:
            gone = [k for k in self.objects if k not in fresh]
            previous = self.objects
            self.objects = dict(fresh)
            self.lock.notify_all()
        for key in gone:
            self._tell("DELETED", previous[key], now)
        for obj in fresh.values():
            self._tell("ADDED", obj, now)
        self.synced.set()
        return str(answer["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        for event in self.api.watch(self.path, version, timeout_seconds=30, opened=self._opened):
            if self._halt.is_set():
                break
            kind, obj = event["type"], event["object"]
            if kind == "ERROR":
                code = int((obj or {}).get("code") or 0)
                raise ApiError(code, str(obj), f"watch {self.path}")
            version = str(obj["metadata"]["resourceVersion"])
            if kind == "BOOKMARK":
                continue
            now = time.monotonic()
            with self.lock:
                if kind == "DELETED":
                    self.objects.pop(key_of(obj), None)
                else:
                    self.objects[key_of(obj)] = obj
                self.lock.notify_all()
            self._tell(kind, obj, now)
        return version

    def _opened(self, conn: http.client.HTTPSConnection) -> None:
        self._conn = conn
        if self._halt.is_set():  # halted while this watch was being opened
            self.halt()

    def _tell(self, kind: str, obj: dict[str, Any], now: float) -> None:
        for handler in self.handlers:
            handler(kind, obj, now)
