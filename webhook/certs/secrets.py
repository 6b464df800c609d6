"""The Kubernetes side of certificate management: Secrets that hold the pair, and caBundle injection.

Uses the official client, configured in-cluster when running in a pod (and no kubeconfig is named),
else from a kubeconfig (``--kubeconfig``/``KUBECONFIG``/``~/.kube/config``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webhook.common.kubeclient import ApiFailure, ClientConfig, new_api_client

SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeError(RuntimeError):
    pass


def api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """The client every role builds (``common.kubeclient``), with urllib3's retries (no loop retries here)."""
    client = new_api_client(ClientConfig(kubeconfig, context, retries=True), "Kubernetes")
    if isinstance(client, ApiFailure):
        raise KubeError(f"no Kubernetes configuration: {client.message}")
    return client


def current_namespace(default: str = "default") -> str:
    try:
        return SA_NAMESPACE_FILE.read_text(encoding="utf-8").strip() or default
    except OSError:
        return default


def _api_error(exc: Exception, what: str) -> KubeError:
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None) or str(exc)
    return KubeError(f"{what}: HTTP {status} {reason}")


def read_secret(api: Any, namespace: str, name: str) -> dict[str, bytes] | None:
    """The decoded data of a Secret, or None when it does not exist."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        secret = client.CoreV1Api(api).read_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise _api_error(exc, f"read Secret {namespace}/{name}") from None
    return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}


def write_secret(
    api: Any,
    namespace: str,
    name: str,
    data: Mapping[str, bytes],
    secret_type: str,
    labels: Mapping[str, str] | None = None,
) -> str:
    """Create the Secret or merge ``data`` into the existing one; returns "created" or "updated"."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    encoded: dict[str, bytes | str] = {k: base64.b64encode(v).decode("ascii") for k, v in data.items()}
    body = client.V1Secret(
        api_version="v1",
        kind="Secret",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=dict(labels or {})),
        type=secret_type,
        data=encoded,
    )
    try:
        core.create_namespaced_secret(namespace, body)
        return "created"
    except ApiException as exc:
        if exc.status != 409:
            raise _api_error(exc, f"create Secret {namespace}/{name}") from None
    try:
        core.patch_namespaced_secret(name, namespace, {"data": encoded})
    except ApiException as exc:
        raise _api_error(exc, f"update Secret {namespace}/{name}") from None
    return "updated"


def inject_ca_bundle(api: Any, config_name: str, bundle_b64: str, validating: bool = False) -> list[str]:
    """Set ``clientConfig.caBundle`` on every webhook of the configuration; returns the webhook names.

    Only the caBundle fields change; running it again with the same bundle changes nothing.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    admission = client.AdmissionregistrationV1Api(api)
    kind = "ValidatingWebhookConfiguration" if validating else "MutatingWebhookConfiguration"
    read = (
        admission.read_validating_webhook_configuration
        if validating
        else admission.read_mutating_webhook_configuration
    )
    patch = (
        admission.patch_validating_webhook_configuration
        if validating
        else admission.patch_mutating_webhook_configuration
    )
    try:
        current = read(config_name)
    except ApiException as exc:
        raise _api_error(exc, f"read {kind} {config_name}") from None
    names = [w.name for w in (current.webhooks or [])]
    if not names:
        raise KubeError(f"{kind} {config_name} has no webhooks to inject into")
    # A JSON patch (a list body) is explicit about what it changes; each "test" pins the index to the
    # webhook read above, so a concurrent reorder fails the patch instead of writing the wrong entry.
    ops: list[dict[str, Any]] = []
    for index, name in enumerate(names):
        ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": name})
        ops.append({"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": bundle_b64})
    try:
        patch(config_name, ops)
    except ApiException as exc:
        raise _api_error(exc, f"patch {kind} {config_name}") from None
    return names
