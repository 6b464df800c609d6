"""``GET /fencing/status`` on the member role's server: ``flink-failover status`` for tools, as JSON.

Query: ``held=true`` (only held jobs), ``object=NAMESPACE/NAME`` with ``kind`` (one job). The member
cluster's API client and the storage lanes are made once, on first use, in the worker that serves it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict

from flask import Blueprint, Response, request

from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.fencing.flinkapi import PLURALS, FlinkApi
from webhook.fencing.lanes import Lanes
from webhook.fencing.records import FencingStore
from webhook.fencing.status import collect
from webhook.policy.restore import RestorePolicy
from webhook.restore.storage.search import CheckpointStorage


def status_blueprint(config: ClientConfig, cluster: str, policy: RestorePolicy) -> Blueprint:
    blueprint = Blueprint("fencing-status", __name__)
    lock = threading.Lock()
    made: list[tuple[FlinkApi, FencingStore]] = []

    def parts() -> tuple[FlinkApi, FencingStore] | ApiFailure:
        with lock:
            if not made:
                api = FlinkApi.connect(config)
                if isinstance(api, ApiFailure):
                    return api  # not kept: the next request tries again
                lanes = Lanes(policy.fencing.call_timeout)
                made.append((api, FencingStore(CheckpointStorage(policy.storage_options), cluster, lanes)))
            return made[0]

    @blueprint.get("/fencing/status")
    def fencing_status() -> Response:
        target = None
        wanted = request.args.get("object", "")
        if wanted:
            namespace, _, name = wanted.partition("/")
            kind = request.args.get("kind", "FlinkDeployment")
            if not namespace or not name or kind not in PLURALS:
                return _json(
                    {"error": "object must be NAMESPACE/NAME and kind one of " + ", ".join(PLURALS)}, 400
                )
            target = (kind, namespace, name)
        found = parts()
        if isinstance(found, ApiFailure):
            return _json({"error": found.message}, 503)
        api, store = found
        held = request.args.get("held", "").lower() in ("1", "true", "yes")
        collected = collect(api, store, policy, cluster, target, held)
        body = {"cluster": cluster, "jobs": [asdict(v) for v in collected.views]}
        return _json({**body, "problems": collected.problems, "notes": collected.notes}, 200)

    return blueprint


def _json(body: object, status: int) -> Response:
    return Response(json.dumps(body, default=str), status=status, mimetype="application/json")
