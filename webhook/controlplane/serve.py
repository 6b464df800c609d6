"""The control-plane role started for serving: the Karmada client, the capture watch and the Work handler.

Built inside the (single) gunicorn worker after fork, so the watch thread, its cache and the webhook
share one process. Every Flink Work costs one GET of its ResourceBinding (a decision is never made on
the watch cache alone). With leader election every replica serves the Work webhook and only the
holder of the Lease captures; ``--no-capture`` serves the webhook alone: no watch, no writes, and the
records come from whichever instance captures.
"""

from __future__ import annotations

import atexit
import logging
import threading
from dataclasses import dataclass, replace

from webhook import __version__
from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.controlplane.handler import WorkHandler, utc_now
from webhook.controlplane.karmada import KarmadaApi
from webhook.controlplane.leader import ElectionConfig, default_identity
from webhook.controlplane.lookup import BindingCache, FreshLookup
from webhook.controlplane.options import ControlPlaneOptions
from webhook.controlplane.record import annotation_key
from webhook.controlplane.watch import CaptureWhileLeading, Watcher

log = logging.getLogger(__name__)

WORK_PATH = "/mutate-work"


@dataclass(frozen=True)
class ControlPlane:
    """The Work webhook's handler, what it answers on an internal error, and its own readiness."""

    handler: WorkHandler
    problem: str  # why there is no Karmada API client, "" when there is one
    cache: BindingCache
    capture: bool

    def ready(self) -> str | None:
        if self.problem:
            return f"no Karmada API client: {self.problem}"
        if self.capture and not self.cache.synced:
            return "ResourceBinding cache not synced yet"
        return None


def start_control_plane(options: ControlPlaneOptions) -> ControlPlane:
    """Connect to Karmada, start the capture watch (unless disabled) and build the Work handler."""
    contract = options.contract
    capture_enabled = options.capture
    connected = KarmadaApi.connect(ClientConfig(kubeconfig=options.kubeconfig, context=options.context))
    cache = BindingCache()
    api: KarmadaApi | None = None
    problem = ""
    if isinstance(connected, ApiFailure):
        problem = connected.message
        log.error("control plane cannot reach Karmada: %s", problem)
    else:
        api = connected
    if api is not None and capture_enabled and options.election is None:
        watcher = Watcher(api, cache, annotation_key(contract), utc_now)
        threading.Thread(target=watcher.run, name="resourcebinding-watch", daemon=True).start()
    if api is not None and capture_enabled and options.election is not None:
        start_election(api, cache, annotation_key(contract), options.election)
    lookup = FreshLookup(cache, api, contract, get_timeout=options.get_timeout)
    return ControlPlane(WorkHandler(lookup, contract), problem, cache, capture_enabled)


def start_election(api: KarmadaApi, cache: BindingCache, annotation: str, election: ElectionConfig) -> None:
    from webhook.controlplane.leader import KubeLeases, LeaderElector

    election = replace(election, identity=election.identity or default_identity())
    api.api_client.user_agent = f"flink-failover/{__version__} ({election.identity})"
    switch = CaptureWhileLeading(
        lambda capture: Watcher(api, cache, annotation, utc_now, capture_enabled=capture)
    )
    elector = LeaderElector(KubeLeases(api.objects), election, on_start=switch.lead, on_stop=switch.follow)
    switch.follow()
    threading.Thread(target=elector.run, name="leader-election", daemon=True).start()
    atexit.register(elector.release)  # a clean shutdown hands the Lease over at once
