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
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
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
    # How often (at most) a request checks whether the kubeconfig file, or a tokenFile it names, changed
    # (a mounted Secret updated in place): the new token is used without a restart.
    credentials_check_seconds: float = 10.0
    retries: bool = False  # urllib3's silent retries: off where a loop of ours retries with backoff
    connections: int | None = None  # connections kept per API server (None: the client's cpu count x 5)


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
    if config.connections is not None:
        configuration.connection_pool_maxsize = config.connections
    try:
        if config.kubeconfig or config.context or not _in_cluster():
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=config.kubeconfig, context=config.context, client_configuration=configuration
            )
            if config.kubeconfig:
                hook = TokenRefresh(config, configuration.refresh_api_key_hook)
                configuration.refresh_api_key_hook = hook  # type: ignore[assignment]
        else:
            # The in-cluster loader re-reads the projected service-account token by itself.
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        return ApiFailure(0, f"cannot load {what} credentials from {_credentials_source(config)}: {exc}")
    return client.ApiClient(configuration)


def _credentials_source(config: ClientConfig) -> str:
    """Which file (or account) the credentials were read from, as the user would look for it."""
    import os

    if config.kubeconfig:
        path = os.path.expanduser(config.kubeconfig)
        return f"{config.kubeconfig}" + ("" if os.path.exists(path) else " (no such file)")
    if os.environ.get("KUBECONFIG"):
        return f"$KUBECONFIG ({os.environ['KUBECONFIG']})"
    if config.context or not _in_cluster():
        return "~/.kube/config" + (
            "" if os.path.exists(os.path.expanduser("~/.kube/config")) else " (no such file)"
        )
    return "the in-cluster service account"


class TokenRefresh:
    """The kubeconfig's bearer token, re-read when the kubeconfig or a ``tokenFile`` it names changes.

    The ``kubernetes`` client reads a kubeconfig's token once; a token rotated in the mounted Secret
    would be used only after a restart (and the old one, once revoked, fails every request). The client
    calls this hook before each request; it looks at the files' stat at most every
    ``credentials_check_seconds`` and, on a change, loads the kubeconfig anew and takes its token.
    """

    def __init__(self, config: ClientConfig, inner: Callable[[Any], None] | None) -> None:
        import threading
        import time

        self._config = config
        self._inner = inner  # the loader's own hook (exec plugins, expiring tokens)
        self._lock = threading.Lock()
        self._clock = time.monotonic
        self._checked = self._clock()
        self._seen = self._fingerprint()

    def _paths(self) -> list[str]:
        import os

        import yaml

        path = str(self._config.kubeconfig)
        paths = [path]
        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            return paths
        users = doc.get("users") if isinstance(doc, Mapping) else None
        for entry in users if isinstance(users, list) else []:
            user = entry.get("user") if isinstance(entry, Mapping) else None
            token_file = user.get("tokenFile") if isinstance(user, Mapping) else None
            if isinstance(token_file, str) and token_file:
                paths.append(os.path.join(os.path.dirname(os.path.abspath(path)), token_file))
        return paths

    def _fingerprint(self) -> tuple[tuple[int, int, int], ...]:
        import os

        out = []
        for path in self._paths():
            try:
                st = os.stat(path)  # follows the ..data symlink a Secret volume swaps on update
                out.append((st.st_ino, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((0, 0, 0))
        return tuple(out)

    def __call__(self, configuration: Any) -> None:
        if self._inner is not None:
            self._inner(configuration)
            configuration.refresh_api_key_hook = self  # the loader's hook puts itself back: stay first
        now = self._clock()
        with self._lock:
            if now - self._checked < self._config.credentials_check_seconds:
                return
            self._checked = now
            seen = self._fingerprint()
            if seen == self._seen:
                return
            import yaml
            from kubernetes import client
            from kubernetes import config as kube_config
            from kubernetes.config.config_exception import ConfigException

            fresh = client.Configuration()
            try:
                kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=self._config.kubeconfig,
                    context=self._config.context,
                    client_configuration=fresh,
                )
            except (ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as exc:
                log.warning("kubeconfig changed but cannot be loaded (keeping the old token): %s", exc)
                return  # a half-written file: tried again at the next check
            self._seen = seen
            self._inner = fresh.refresh_api_key_hook
            configuration.api_key = dict(fresh.api_key)
            configuration.api_key_prefix = dict(fresh.api_key_prefix)
            log.info("kubeconfig changed: using its new credentials")


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


_RANDOM = secrets.SystemRandom()


@dataclass
class Backoff:
    """Capped exponential backoff with jitter, for the list/watch loops and the record writer.

    The base doubles from ``initial`` up to ``maximum``; each pause is drawn from
    ``[base * (1 - jitter), base]``, so the replicas and watches that lost one API server together do
    not all come back in the same instant (client-go's ``wait.Backoff`` jitters too; here the cap stays a
    cap). ``draw`` is the random source, in [0, 1).
    """

    initial: float = 0.2
    maximum: float = 10.0
    jitter: float = 0.5
    current: float = 0.0  # the base of the last pause (0: none since the last reset)
    draw: Callable[[], float] = field(default=_RANDOM.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be in [0, 1], not {self.jitter}")

    def next(self) -> float:
        self.current = self.initial if self.current == 0 else min(self.maximum, self.current * 2)
        return self.current * (1.0 - self.jitter * self.draw())

    def reset(self) -> None:
        self.current = 0.0
