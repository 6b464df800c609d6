"""``flink-failover serve --role control-plane``: the Work webhook, the capture loop and the placement API.

Built inside the (single) gunicorn worker after fork, so the watch thread, its cache and the webhook
share one process. ``--no-capture`` serves the webhook alone: no watch, no writes; every Work then
costs one GET of its ResourceBinding, and the records come from whichever instance captures.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import threading
from collections.abc import Callable
from typing import Any

from webhook import __version__
from webhook.controlplane.handler import WorkHandler, annotation_key, internal_error, utc_now
from webhook.controlplane.kube import ApiFailure, ClientConfig, KarmadaApi
from webhook.controlplane.leader import ElectionConfig, default_identity
from webhook.controlplane.watch import BindingCache, CachedLookup, Watcher
from webhook.policy import RestorePolicy

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
    election = election_config(args)
    if api is not None and capture_enabled and election is None:
        watcher = Watcher(api, cache, annotation_key(policy), utc_now)
        threading.Thread(target=watcher.run, name="resourcebinding-watch", daemon=True).start()
    if api is not None and capture_enabled and election is not None:
        start_election(api, cache, annotation_key(policy), election)
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


# --- leader election (--leader-elect): every replica serves the Work webhook, one captures -------------


def election_config(args: argparse.Namespace) -> ElectionConfig | None:
    if not getattr(args, "leader_elect", False):
        return None
    return ElectionConfig(
        namespace=args.lease_namespace,
        name=args.lease_name,
        identity=default_identity(),
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )


def check_arguments(args: argparse.Namespace) -> str | None:
    """Checked before the server starts: a bad election setting is a usage error, not a crashing worker."""
    election = election_config(args)
    if election is not None and getattr(args, "no_capture", False):
        return "--leader-elect elects the capturing replica: it cannot be combined with --no-capture"
    return election.problem() if election is not None else None


def start_election(api: KarmadaApi, cache: BindingCache, annotation: str, election: ElectionConfig) -> None:
    from webhook.controlplane.leader import CaptureWhileLeading, KubeLeases, LeaderElector

    api.api_client.user_agent = f"flink-failover/{__version__} ({election.identity})"
    switch = CaptureWhileLeading(
        lambda capture: Watcher(api, cache, annotation, utc_now, capture_enabled=capture)
    )
    elector = LeaderElector(KubeLeases(api.api_client), election, on_start=switch.lead, on_stop=switch.follow)
    switch.follow()
    threading.Thread(target=elector.run, name="leader-election", daemon=True).start()
    atexit.register(elector.release)  # a clean shutdown hands the Lease over at once
