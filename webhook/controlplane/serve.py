"""``flink-failover serve --role control-plane``: the Work webhook, the capture loop and the placement API.

Built inside the (single) gunicorn worker after fork, so the watch thread, its cache and the webhook
share one process. ``--no-capture`` serves the webhook alone: no watch, no writes; every Work then
costs one GET of its ResourceBinding, and the records come from whichever instance captures.
"""

from __future__ import annotations

import argparse
import logging
import threading
from collections.abc import Callable
from typing import Any

from webhook.controlplane.handler import WorkHandler, annotation_key, internal_error, utc_now
from webhook.controlplane.kube import ApiFailure, ClientConfig, KarmadaApi
from webhook.controlplane.watch import BindingCache, CachedLookup, Watcher
from webhook.member.policy import RestorePolicy

log = logging.getLogger(__name__)

WORK_PATH = "/mutate-work"
ROLE = "control-plane"


def placement_blueprints() -> list[Any]:
    """The component-fit placement API, when that part of the package is present."""
    try:
        from webhook.placement.http import blueprint
    except ImportError as exc:
        log.info("placement API not served: %s", exc)
        return []
    from flask import Blueprint

    made = blueprint if isinstance(blueprint, Blueprint) else blueprint()
    return [made]


def control_plane_config(
    args: argparse.Namespace, policy: RestorePolicy, ready: Callable[[], str | None]
) -> Any:
    from webhook.server.app import Endpoint, ServerConfig

    capture_enabled = not getattr(args, "no_capture", False)
    connected = KarmadaApi.connect(
        ClientConfig(kubeconfig=getattr(args, "kubeconfig", None), context=getattr(args, "context", None))
    )
    cache = BindingCache()
    api: KarmadaApi | None = None
    problem = ""
    if isinstance(connected, ApiFailure):
        problem = connected.message
        log.error("control plane cannot reach Karmada: %s", problem)
    else:
        api = connected
    if api is not None and capture_enabled:
        watcher = Watcher(api, cache, annotation_key(policy), utc_now)
        threading.Thread(target=watcher.run, name="resourcebinding-watch", daemon=True).start()
    if capture_enabled:
        lookup = CachedLookup(cache, api, policy, get_timeout=policy.deadline_seconds)
    else:
        lookup = CachedLookup(BindingCache(), api, policy, get_timeout=policy.deadline_seconds)
    handler = WorkHandler(lookup, policy)

    def combined_ready() -> str | None:
        reason = ready()
        if reason is not None:
            return reason
        if problem:
            return f"no Karmada API client: {problem}"
        if capture_enabled and not cache.synced:
            return "ResourceBinding cache not synced yet"
        return None

    endpoint = Endpoint(WORK_PATH, ROLE, handler, internal_error)
    return ServerConfig([endpoint], combined_ready, blueprints=placement_blueprints())
