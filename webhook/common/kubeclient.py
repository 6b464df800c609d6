"""Talking to a Kubernetes API server through the ``kubernetes`` client, errors as values.

Shared by the roles that list and watch: the control plane (ResourceBindings on the Karmada API server)
and the estimator (nodes and pods of a member cluster). Paginated lists, watches read event by event,
client construction from a kubeconfig or the in-cluster account, and the backoff between retries.
Connection problems, HTTP errors and unreadable bodies come back as :class:`ApiFailure` (``status`` 0
when no HTTP answer arrived), never as exceptions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

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
    retries: bool = False  # urllib3's silent retries: off where a loop of ours retries with backoff


def failure(exc: BaseException) -> ApiFailure:
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, ApiException):
        return ApiFailure(int(exc.status or 0), f"{exc.status} {exc.reason}: {_short(exc.body)}")
    return ApiFailure(0, f"{type(exc).__name__}: {exc}")


def _short(body: Any) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    return " ".join(text.split())[:300]


def api_errors() -> tuple[type[BaseException], ...]:
    import urllib3
    from kubernetes.client.exceptions import ApiException

    return (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


@dataclass(frozen=True)
class Page:
    items: list[Mapping[str, Any]]
    resource_version: str


def list_pages(call: Callable[..., Any], config: ClientConfig, kind: str) -> Iterator[Page | ApiFailure]:
    """A paginated list page by page (``call(**kwargs)`` returns one decoded page); ends after the last
    page or the first failure, so a caller can keep just one page in memory."""
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": config.list_page, "_request_timeout": config.request_timeout}
        if token:
            kwargs["_continue"] = token
        try:
            page = call(**kwargs)
        except api_errors() as exc:
            yield failure(exc)
            return
        if not isinstance(page, Mapping) or not isinstance(page.get("items"), list):
            yield ApiFailure(0, f"list answer is not a {kind}")
            return
        raw_meta = page.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        yield Page(
            [i for i in page["items"] if isinstance(i, Mapping)], str(meta.get("resourceVersion") or "")
        )
        token = meta.get("continue") or None
        if not token:
            return


def new_api_client(config: ClientConfig, what: str) -> Any:
    """The one way every role builds a ``kubernetes`` ApiClient, or an ApiFailure saying why it cannot:
    the in-cluster account inside a pod when neither a kubeconfig nor a context is named, else the
    kubeconfig (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``) at that context."""
    from kubernetes import client
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    if not config.retries:  # our loops retry with backoff; urllib3's retries would stretch the deadlines
        configuration.retries = False
    try:
        if config.kubeconfig or config.context or not _in_cluster():
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=config.kubeconfig, context=config.context, client_configuration=configuration
            )
        else:
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        return ApiFailure(0, f"cannot load {what} credentials: {exc}")
    return client.ApiClient(configuration)


def watch_events(
    call: Callable[..., Any], config: ClientConfig, resource_version: str
) -> Iterator[WatchEvent | WatchEnded | ApiFailure]:
    """One watch from ``resource_version`` (``call(**kwargs)`` opens it, unparsed), event by event; ends
    with WatchEnded, or with an ApiFailure when it broke. Releases the connection."""
    try:
        response = call(
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=config.watch_timeout,
            _request_timeout=(config.request_timeout, config.watch_read_timeout),
        )
    except api_errors() as exc:
        yield failure(exc)
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
    except api_errors() as exc:
        yield failure(exc)
        return
    finally:
        response.release_conn()
    yield WatchEnded()


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


@dataclass
class Backoff:
    """Capped exponential backoff for list/watch loops."""

    initial: float = 0.2
    maximum: float = 10.0
    current: float = 0.0

    def next(self) -> float:
        self.current = self.initial if self.current == 0 else min(self.maximum, self.current * 2)
        return self.current

    def reset(self) -> None:
        self.current = 0.0
