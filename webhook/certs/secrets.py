"""The Kubernetes side of certificate management: Secrets that hold the pair, and caBundle injection.

A typed facade over ``common.kubeobjects.KubeObjects`` (in-cluster when running in a pod and no
kubeconfig is named, else ``--kubeconfig``/``KUBECONFIG``/``~/.kube/config``). Every call returns an
:class:`ApiFailure` instead of raising; the command (``commands/certs.py``) turns it into its message.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.kubeobjects import KubeObjects, Resource

SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
SECRETS = Resource("", "v1", "secrets", "Secret")
MUTATING = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration"
)
VALIDATING = Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration"
)


def connect(kubeconfig: str | None = None, context: str | None = None) -> KubeObjects | ApiFailure:
    """The client every role builds, with urllib3's retries (no loop of ours retries here)."""
    made = KubeObjects.connect(ClientConfig(kubeconfig, context, retries=True), "Kubernetes")
    if isinstance(made, ApiFailure):
        return ApiFailure(0, f"no Kubernetes configuration: {made.message}")
    return made


def current_namespace(default: str = "default") -> str:
    try:
        return SA_NAMESPACE_FILE.read_text(encoding="utf-8").strip() or default
    except OSError:
        return default


def _failed(problem: ApiFailure, what: str) -> ApiFailure:
    """``what`` failed: HTTP <status> <reason>: <body>, or why no answer came."""
    return ApiFailure(problem.status, f"{what}: {'HTTP ' if problem.status else ''}{problem.message}")


def read_secret(api: KubeObjects, namespace: str, name: str) -> dict[str, bytes] | ApiFailure | None:
    """The decoded data of a Secret, or None when it does not exist."""
    secret = api.get(SECRETS, namespace, name)
    if secret is None:
        return None
    if isinstance(secret, ApiFailure):
        return _failed(secret, f"read Secret {namespace}/{name}")
    data = secret.get("data") or {}
    return {str(k): base64.b64decode(v) for k, v in data.items()} if isinstance(data, Mapping) else {}


def write_secret(
    api: KubeObjects,
    namespace: str,
    name: str,
    data: Mapping[str, bytes],
    secret_type: str,
    labels: Mapping[str, str] | None = None,
) -> str | ApiFailure:
    """Create the Secret or merge ``data`` into the existing one; returns "created" or "updated"."""
    encoded = {k: base64.b64encode(v).decode("ascii") for k, v in data.items()}
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "type": secret_type,
        "data": encoded,
    }
    created = api.create(SECRETS, namespace, body)
    if not isinstance(created, ApiFailure):
        return "created"
    if created.status != 409:
        return _failed(created, f"create Secret {namespace}/{name}")
    patched = api.merge_patch(SECRETS, namespace, name, {"data": encoded})
    return (
        _failed(patched, f"update Secret {namespace}/{name}")
        if isinstance(patched, ApiFailure)
        else "updated"
    )


def inject_ca_bundle(
    api: KubeObjects, config_name: str, bundle_b64: str, validating: bool = False
) -> list[str] | ApiFailure:
    """Set ``clientConfig.caBundle`` on every webhook of the configuration; returns the webhook names.

    Only the caBundle fields change; running it again with the same bundle changes nothing.
    """
    resource = VALIDATING if validating else MUTATING
    what = f"{resource.kind} {config_name}"
    current = api.get(resource, None, config_name)
    if current is None:
        return ApiFailure(404, f"read {what}: HTTP 404 Not Found")
    if isinstance(current, ApiFailure):
        return _failed(current, f"read {what}")
    webhooks: Any = current.get("webhooks") or []
    names = [str(w.get("name", "")) for w in webhooks if isinstance(w, Mapping)]
    if not names:
        return ApiFailure(0, f"{what} has no webhooks to inject into")
    # A JSON patch (a list body) is explicit about what it changes; each "test" pins the index to the
    # webhook read above, so a concurrent reorder fails the patch instead of writing the wrong entry.
    ops: list[dict[str, Any]] = []
    for index, name in enumerate(names):
        ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": name})
        ops.append({"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": bundle_b64})
    patched = api.json_patch(resource, None, config_name, ops)
    return _failed(patched, f"patch {what}") if isinstance(patched, ApiFailure) else names
