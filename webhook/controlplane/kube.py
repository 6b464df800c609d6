"""The few Karmada API calls the control plane makes, through the ``kubernetes`` client, errors as values.

list (paginated), watch (a stream of JSON lines), get, and a merge patch of one annotation; all on
``resourcebindings.work.karmada.io/v1alpha2``. Connection problems, HTTP errors and unreadable bodies
come back as :class:`ApiFailure` (``status`` 0 when no HTTP answer arrived), never as exceptions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.controlplane.binding import API_GROUP, API_VERSION, PLURAL

log = logging.getLogger(__name__)

LIST_PAGE = 500
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class ApiFailure:
    status: int  # HTTP status, 0 when the connection failed or the body was unreadable
    message: str

    @property
    def gone(self) -> bool:
        return self.status == 410


@dataclass(frozen=True)
class Listed:
    items: tuple[Mapping[str, Any], ...]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: Mapping[str, Any]


@dataclass(frozen=True)
class WatchEnded:
    """The server closed the stream normally (its timeoutSeconds): watch again from the last version."""


@dataclass(frozen=True)
class ClientConfig:
    kubeconfig: str | None = None
    context: str | None = None
    request_timeout: float = 10.0  # list, get and patch
    watch_timeout: int = 290  # server-side timeoutSeconds of one watch request
    watch_read_timeout: float = 330.0  # no byte for this long (bookmarks included): the connection is dead
    list_page: int = LIST_PAGE


def _failure(exc: BaseException) -> ApiFailure:
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, ApiException):
        return ApiFailure(int(exc.status or 0), f"{exc.status} {exc.reason}: {_short(exc.body)}")
    return ApiFailure(0, f"{type(exc).__name__}: {exc}")


def _short(body: Any) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    return " ".join(text.split())[:300]


def _api_errors() -> tuple[type[BaseException], ...]:
    import urllib3
    from kubernetes.client.exceptions import ApiException

    return (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


class KarmadaApi:
    """ResourceBindings on the Karmada API server. Build with :meth:`connect` (kubeconfig or in-cluster)."""

    def __init__(self, api_client: Any, config: ClientConfig) -> None:
        from kubernetes import client

        self._client = api_client
        self._custom = client.CustomObjectsApi(api_client)
        self.config = config

    @property
    def api_client(self) -> Any:
        """The underlying ``kubernetes.client.ApiClient`` (shared with the leader election's Lease calls)."""
        return self._client

    @classmethod
    def connect(cls, config: ClientConfig) -> KarmadaApi | ApiFailure:
        from kubernetes import client
        from kubernetes import config as kube_config
        from kubernetes.config.config_exception import ConfigException

        configuration = client.Configuration()
        # Our own loops retry with backoff; urllib3's silent retries would only stretch the deadlines.
        configuration.retries = False
        try:
            if config.kubeconfig or not _in_cluster():
                kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=config.kubeconfig, context=config.context, client_configuration=configuration
                )
            else:
                kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (ConfigException, OSError, ValueError, TypeError) as exc:
            return ApiFailure(0, f"cannot load Karmada API credentials: {exc}")
        api_client = client.ApiClient(configuration)
        return cls(api_client, config)

    def list_bindings(self) -> Listed | ApiFailure:
        items: list[Mapping[str, Any]] = []
        token: str | None = None
        version = ""
        while True:
            kwargs: dict[str, Any] = {
                "limit": self.config.list_page,
                "_request_timeout": self.config.request_timeout,
            }
            if token:
                kwargs["_continue"] = token
            try:
                page = self._custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL, **kwargs)
            except _api_errors() as exc:
                return _failure(exc)
            if not isinstance(page, Mapping) or not isinstance(page.get("items"), list):
                return ApiFailure(0, "list answer is not a ResourceBindingList")
            items += [i for i in page["items"] if isinstance(i, Mapping)]
            raw_meta = page.get("metadata")
            meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
            version = str(meta.get("resourceVersion") or version)
            token = meta.get("continue") or None
            if not token:
                return Listed(tuple(items), version)

    def watch_bindings(self, resource_version: str) -> Iterator[WatchEvent | WatchEnded | ApiFailure]:
        """Events after ``resource_version``; ends with WatchEnded, or with an ApiFailure when it broke."""
        try:
            response: Any = self._custom.list_cluster_custom_object(
                API_GROUP,
                API_VERSION,
                PLURAL,
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.config.watch_timeout,
                _preload_content=False,
                _request_timeout=(self.config.request_timeout, self.config.watch_read_timeout),
            )
        except _api_errors() as exc:
            yield _failure(exc)
            return
        try:
            for line in _lines(response):
                try:
                    doc = json.loads(line)
                except ValueError:
                    yield ApiFailure(0, f"watch sent a line that is not JSON: {_short(line)}")
                    return
                if not isinstance(doc, Mapping) or not isinstance(doc.get("object"), Mapping):
                    yield ApiFailure(0, f"watch sent something that is not an event: {_short(line)}")
                    return
                yield WatchEvent(str(doc.get("type", "")), doc["object"])
        except _api_errors() as exc:
            yield _failure(exc)
            return
        finally:
            response.release_conn()
        yield WatchEnded()

    def get_binding(
        self, namespace: str, name: str, timeout: float | None = None
    ) -> Mapping[str, Any] | ApiFailure | None:
        try:
            obj = self._custom.get_namespaced_custom_object(
                API_GROUP,
                API_VERSION,
                namespace,
                PLURAL,
                name,
                # connect + read within the budget: the webhook's deadline covers the whole request
                _request_timeout=((timeout or self.config.request_timeout) / 2,) * 2,
            )
        except _api_errors() as exc:
            failure = _failure(exc)
            return None if failure.status == 404 else failure
        return obj if isinstance(obj, Mapping) else ApiFailure(0, "get answer is not an object")

    def patch_annotation(
        self, namespace: str, name: str, key: str, value: str
    ) -> Mapping[str, Any] | ApiFailure:
        body = {"metadata": {"annotations": {key: value}}}
        try:
            obj = self._custom.patch_namespaced_custom_object(
                API_GROUP,
                API_VERSION,
                namespace,
                PLURAL,
                name,
                body,
                _content_type=MERGE_PATCH,
                _request_timeout=self.config.request_timeout,
            )
        except _api_errors() as exc:
            return _failure(exc)
        return obj if isinstance(obj, Mapping) else ApiFailure(0, "patch answer is not an object")


def _in_cluster() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _lines(response: Any) -> Iterator[bytes]:
    """Split a chunked watch body into lines as bytes arrive (one event per line)."""
    buffer = b""
    for chunk in response.stream(None, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer
