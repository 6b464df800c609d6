"""A minimal Kubernetes API server (HTTP, in memory) for the certificate commands' API calls.

It serves exactly what ``certs inject`` and ``certs generate/renew --secret`` use: GET/PATCH of
MutatingWebhookConfigurations and ValidatingWebhookConfigurations, and GET/POST/PATCH of Secrets,
with JSON patch and merge patch applied like the real API server would.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonpatch

from tests.support.kube import failure_status, merge_patch, send_json, write_kubeconfig

_WEBHOOKS = re.compile(
    r"^/apis/admissionregistration\.k8s\.io/v1/(mutating|validating)webhookconfigurations/([^/]+)$"
)
_SECRET = re.compile(r"^/api/v1/namespaces/([^/]+)/secrets(?:/([^/]+))?$")


class FakeKube:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str]] = []  # (method, path, content-type)
        self.authorization: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._scheme = "http"
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeKube:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def kubeconfig(self, directory: Path) -> Path:
        return write_kubeconfig(directory / "kubeconfig", self.url, token="t0ken")

    def add_webhook_config(self, name: str, webhooks: list[str], validating: bool = False) -> None:
        kind = "validating" if validating else "mutating"
        entries = [
            {
                "name": w,
                "clientConfig": {
                    "service": {"name": "svc", "namespace": "ns", "path": "/mutate", "port": 443}
                },
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "rules": [
                    {
                        "apiGroups": ["flink.apache.org"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE"],
                        "resources": ["flinkdeployments"],
                    }
                ],
            }
            for w in webhooks
        ]
        self.objects[f"/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations/{name}"] = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": f"{kind.capitalize()}WebhookConfiguration",
            "metadata": {"name": name, "resourceVersion": "1"},
            "webhooks": entries,
        }

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                send_json(self, code, body)

            def _status(self, code: int, reason: str) -> None:
                send_json(self, code, failure_status(code, reason, reason))

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"null")

            def _record(self) -> str:
                path = self.path.split("?")[0]
                fake.requests.append((self.command, path, self.headers.get("Content-Type", "")))
                fake.authorization.append(self.headers.get("Authorization", ""))
                return path

            def do_GET(self) -> None:
                path = self._record()
                with fake._lock:
                    obj = fake.objects.get(path)
                if obj is None:
                    self._status(404, "NotFound")
                else:
                    self._send(200, obj)

            def do_POST(self) -> None:
                path = self._record()
                match = _SECRET.match(path)
                if not match:
                    self._status(404, "NotFound")
                    return
                body = self._body()
                key = f"{path}/{body['metadata']['name']}"
                with fake._lock:
                    if key in fake.objects:
                        self._status(409, "AlreadyExists")
                        return
                    body["metadata"]["resourceVersion"] = "1"
                    fake.objects[key] = body
                self._send(201, body)

            def do_PATCH(self) -> None:
                path = self._record()
                content_type = self.headers.get("Content-Type", "")
                body = self._body()
                with fake._lock:
                    obj = fake.objects.get(path)
                    if obj is None:
                        self._status(404, "NotFound")
                        return
                    if content_type.startswith("application/json-patch+json"):
                        try:
                            new = jsonpatch.apply_patch(obj, body)
                        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                            self._status(422, f"Invalid: {exc}")
                            return
                    elif _WEBHOOKS.match(path):
                        # a merge patch would replace the whole webhooks list: refuse, as a guard
                        self._status(
                            415, f"test server: unexpected {content_type} on a webhook configuration"
                        )
                        return
                    else:
                        new = merge_patch(obj, body)
                    new["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
                    fake.objects[path] = new
                self._send(200, new)

        return Handler
