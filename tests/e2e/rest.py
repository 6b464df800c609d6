"""A small REST client for the tier's API servers: JSON in and out, a deadline on every call, watches.

The tests act on the API servers as a user or a controller would (kubectl for manifests, this for
status writes, samples and watches); the product uses its own client. One keep-alive connection per
thread: the operator doubles and the samplers call many times a second.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit


class ApiError(Exception):
    def __init__(self, status: int, body: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


@dataclass
class Rest:
    url: str
    ca: Path
    token: str
    timeout: float = 15.0
    name: str = ""  # which API server, for logs

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 443
        self._context = ssl.create_default_context(cafile=str(self.ca))
        self._local = threading.local()

    def as_user(self, token: str) -> Rest:
        return Rest(self.url, self.ca, token, self.timeout, self.name)

    def _connection(self, timeout: float) -> http.client.HTTPSConnection:
        conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._context)
            self._local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        ok_missing: bool = False,
    ) -> Any:
        target = path + (f"?{urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):  # a keep-alive connection the server closed is retried once, fresh
            conn = self._connection(self.timeout)
            try:
                conn.request(method, target, body=data, headers=headers)
                answer = conn.getresponse()
                text = answer.read().decode()
                break
            except (http.client.HTTPException, ConnectionError, TimeoutError, ssl.SSLError, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        if answer.status == 404 and ok_missing:
            return None
        if answer.status >= 300:
            raise ApiError(answer.status, text, f"{method} {target}")
        return json.loads(text) if text else None

    def raw(self, path: str) -> str:
        """A GET answered in text (``/metrics``)."""
        conn = http.client.HTTPSConnection(
            self._host, self._port, timeout=self.timeout, context=self._context
        )
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
            answer = conn.getresponse()
            text = answer.read().decode()
            if answer.status >= 300:
                raise ApiError(answer.status, text, f"GET {path}")
            return text
        finally:
            conn.close()

    def get(self, path: str, ok_missing: bool = False) -> Any:
        return self.call("GET", path, ok_missing=ok_missing)

    def create(self, path: str, body: Any) -> Any:
        return self.call("POST", path, body)

    def replace(self, path: str, body: Any) -> Any:
        return self.call("PUT", path, body)

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.call("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path, ok_missing=True)

    def watch(
        self,
        path: str,
        resource_version: str,
        timeout_seconds: int = 60,
        opened: Callable[[http.client.HTTPSConnection], None] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Events from ``resource_version`` until the server ends the watch (or its socket times out);
        ``opened`` is handed the connection once the request is sent (a caller that stops waiting shuts
        its socket down: the read blocked on it ends at once)."""
        query = urlencode(
            {
                "watch": "1",
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(timeout_seconds),
            }
        )
        conn = http.client.HTTPSConnection(
            self._host, self._port, timeout=timeout_seconds + 10, context=self._context
        )
        try:
            conn.request("GET", f"{path}?{query}", headers={"Authorization": f"Bearer {self.token}"})
            if opened is not None:
                opened(conn)
            answer = conn.getresponse()
            if answer.status != 200:
                raise ApiError(answer.status, answer.read().decode(), f"WATCH {path}")
            while True:
                line = answer.readline()
                if not line:
                    return
                yield json.loads(line)
        finally:
            conn.close()


def flink_path(kind: str, namespace: str, name: str = "", subresource: str = "") -> str:
    plural = {
        "FlinkDeployment": "flinkdeployments",
        "FlinkSessionJob": "flinksessionjobs",
        "FlinkBlueGreenDeployment": "flinkbluegreendeployments",
    }[kind]
    path = f"/apis/flink.apache.org/v1beta1/namespaces/{namespace}/{plural}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path
