"""The one Kubernetes client every role uses for API objects, failures as values.

Custom objects (FlinkDeployments, ResourceBindings), Leases, Events (``events.k8s.io/v1``) and core
objects (Nodes, Pods, Secrets) alike, through one generic path: JSON in, JSON out (no model classes,
which cost seconds on a large pod list), every call with a deadline, and every failure an
:class:`~webhook.common.kubeclient.ApiFailure` (``status`` 0 when no HTTP answer arrived), never an
exception. Each role wraps it in a thin typed facade of its own (``controlplane.karmada.KarmadaApi``,
``controlplane.leader.KubeLeases``, ``estimator.member_api.EstimatorApi``, ``member.sessions``,
``certs.secrets``)::

    api = KubeObjects.connect(ClientConfig(kubeconfig, context), "member cluster")  # or an ApiFailure
    FLINK = Resource("flink.apache.org", "v1beta1", "flinkdeployments", "FlinkDeployment")
    api.get(FLINK, "analytics", "orders")         # the object, None (404) or an ApiFailure
    api.list(FLINK)                               # Listed (every page) or an ApiFailure
    for page in api.pages(FLINK): ...             # Page by Page; an ApiFailure ends it
    for event in api.watch(FLINK, version): ...   # WatchEvent ..., then WatchEnded or an ApiFailure
    api.merge_patch(FLINK, "analytics", "orders", {"metadata": {"annotations": {...}}})
    api.create(EVENTS, "analytics", event_body)   # the created object or an ApiFailure (409: exists)
    api.replace(LEASES, "ns", "name", body)       # PUT with the body's resourceVersion (409: conflict)

``timeout`` (seconds, or a (connect, read) pair) defaults to ``ClientConfig.request_timeout``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from webhook.common.kubeclient import (
    MERGE_PATCH,
    ApiFailure,
    ClientConfig,
    Listed,
    Page,
    WatchEnded,
    WatchEvent,
    api_errors,
    failure,
    list_pages,
    new_api_client,
    watch_events,
)

JSON_PATCH = "application/json-patch+json"
AUTH = ["BearerToken"]  # the kubeconfig's or the service account's token (its client certificate is TLS)
Timeout = float | tuple[float, float] | None
Body = Mapping[str, Any]
Answer = Mapping[str, Any] | ApiFailure  # the object the API server answered with, or why not


@dataclass(frozen=True)
class Resource:
    """A kind of object on the API server: its group ("" for core), version and plural."""

    group: str
    version: str
    plural: str
    kind: str  # for messages ("FlinkDeployment")

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        return base + (f"/{quote(name, safe='')}" if name else "")


EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")

# The list and watch options of the ``kubernetes`` client's methods, as the API server's query names.
_QUERY = {
    "limit": "limit",
    "_continue": "continue",
    "watch": "watch",
    "resource_version": "resourceVersion",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
    "field_selector": "fieldSelector",
    "label_selector": "labelSelector",
}


class KubeObjects:
    """GET, LIST (by pages), WATCH, PATCH, POST and PUT of API objects. Build with :meth:`connect`."""

    def __init__(self, api_client: Any, config: ClientConfig) -> None:
        self._client = api_client
        self.config = config

    @classmethod
    def connect(cls, config: ClientConfig, what: str) -> KubeObjects | ApiFailure:
        """``what`` names the API server in messages ("member cluster", "Karmada API")."""
        made = new_api_client(config, what)
        return made if isinstance(made, ApiFailure) else cls(made, config)

    @property
    def api_client(self) -> Any:
        """The underlying ``kubernetes.client.ApiClient`` (its ``user_agent`` may be set)."""
        return self._client

    def get(
        self, resource: Resource, namespace: str | None, name: str, timeout: Timeout = None
    ) -> Mapping[str, Any] | ApiFailure | None:
        answer = self._json("GET", resource.path(namespace, name), timeout=timeout)
        if isinstance(answer, ApiFailure) and answer.status == 404:
            return None
        return answer

    def version(self, timeout: Timeout = None) -> Mapping[str, Any] | ApiFailure:
        """The API server's ``/version`` (``gitVersion``, ``major``, ``minor``): readable by anyone."""
        return self._json("GET", "/version", timeout=timeout)

    def pages(
        self, resource: Resource, namespace: str | None = None, **options: Any
    ) -> Iterator[Page | ApiFailure]:
        """One full list, page by page (``ClientConfig.list_page`` objects each); ends after the last
        page or the first failure. ``options``: ``field_selector``, ``label_selector``."""

        def call(**kwargs: Any) -> Any:
            answer = self._json("GET", resource.path(namespace), {**options, **kwargs})
            if isinstance(answer, ApiFailure):
                raise _Failed(answer)
            return answer

        try:
            yield from list_pages(call, self.config, f"{resource.kind}List")
        except _Failed as failed:
            yield failed.failure

    def list(self, resource: Resource, namespace: str | None = None, **options: Any) -> Listed | ApiFailure:
        """Every object (all pages), and the list's resourceVersion to watch from."""
        items: list[Mapping[str, Any]] = []
        version = ""
        for page in self.pages(resource, namespace, **options):
            if isinstance(page, ApiFailure):
                return page
            items += page.items
            version = page.resource_version or version
        return Listed(tuple(items), version)

    def watch(
        self, resource: Resource, resource_version: str, namespace: str | None = None, **options: Any
    ) -> Iterator[WatchEvent | WatchEnded | ApiFailure]:
        """Events after ``resource_version``; ends with WatchEnded, or with an ApiFailure when it broke."""

        def call(**kwargs: Any) -> Any:
            answer = self._request("GET", resource.path(namespace), {**options, **kwargs}, stream=True)
            if isinstance(answer, ApiFailure):
                raise _Failed(answer)
            return answer

        try:
            yield from watch_events(call, self.config, resource_version)
        except _Failed as failed:
            yield failed.failure

    def merge_patch(
        self, resource: Resource, namespace: str | None, name: str, body: Body, timeout: Timeout = None
    ) -> Answer:
        path = resource.path(namespace, name)
        return self._json("PATCH", path, body=dict(body), content_type=MERGE_PATCH, timeout=timeout)

    def json_patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        ops: Sequence[Body],
        timeout: Timeout = None,
    ) -> Answer:
        """An RFC 6902 patch (its ``test`` operations make it fail rather than write the wrong entry)."""
        path = resource.path(namespace, name)
        return self._json(
            "PATCH", path, body=[dict(op) for op in ops], content_type=JSON_PATCH, timeout=timeout
        )

    def create(
        self, resource: Resource, namespace: str | None, body: Body, timeout: Timeout = None
    ) -> Answer:
        return self._json("POST", resource.path(namespace), body=dict(body), timeout=timeout)

    def replace(
        self, resource: Resource, namespace: str | None, name: str, body: Body, timeout: Timeout = None
    ) -> Answer:
        return self._json("PUT", resource.path(namespace, name), body=dict(body), timeout=timeout)

    # --- the one way out -----------------------------------------------------------------------------

    def _json(
        self, method: str, path: str, query: Mapping[str, Any] | None = None, **request: Any
    ) -> Mapping[str, Any] | ApiFailure:
        """The answer's JSON object, or an ApiFailure (``request``: body, content_type, timeout)."""
        answer = self._request(method, path, query, **request)
        if isinstance(answer, ApiFailure):
            return answer
        try:
            doc = json.loads(answer.data)
        except ValueError:
            return ApiFailure(0, f"{method} {path}: the answer is not JSON")
        if not isinstance(doc, Mapping):
            return ApiFailure(0, f"{method} {path}: the answer is not an object")
        return doc

    def _request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Timeout = None,
        stream: bool = False,
    ) -> Any:
        """The RESTResponse (read, or unread with ``stream``: its ``response`` is urllib3's), or an
        ApiFailure for an HTTP error or no answer."""
        params = dict(query or {})
        timeout = params.pop("_request_timeout", timeout)
        pairs = [
            (_QUERY[key], str(value).lower() if isinstance(value, bool) else str(value))
            for key, value in params.items()
            if value is not None and value != ""
        ]
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            request = self._client.param_serialize(
                method, path, query_params=pairs, header_params=headers, body=body, auth_settings=AUTH
            )
            response = self._client.call_api(
                *request, _request_timeout=timeout if timeout is not None else self.config.request_timeout
            )
            if not 200 <= response.status <= 299 or not stream:
                response.read()
        except api_errors() as exc:
            return failure(exc)
        if not 200 <= response.status <= 299:
            text = (response.data or b"").decode("utf-8", "replace")
            return ApiFailure(int(response.status), f"{response.status} {response.reason}: {_short(text)}")
        return response.response if stream else response


class _Failed(Exception):
    """Carries an ApiFailure through ``list_pages`` / ``watch_events``, which take exception-raising calls."""

    def __init__(self, failure: ApiFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _short(text: str) -> str:
    return " ".join(text.split())[:300]


def micro_time(moment: datetime | None = None) -> str:
    """Kubernetes' MicroTime (a Lease's renewTime, an Event's eventTime): RFC 3339 in UTC with
    microseconds; ``moment`` defaults to now."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
