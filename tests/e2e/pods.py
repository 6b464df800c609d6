"""Pods of the rendered chart, run as local processes: what a kubelet would do, no more.

Nothing here runs containers. A pod's one container becomes the product's console command with the
chart's arguments and environment; its volumes become folders (a Secret's or ConfigMap's keys written
as files, read from the API server the pod lives on; an emptyDir a fresh folder), and every argument or
variable naming a mount path is pointed at its folder; a listening port becomes a free loopback port.
The pod's service account is what it runs as: a token from the TokenRequest API, in a kubeconfig the
process finds through ``$KUBECONFIG``, as a process outside a pod does.
"""

from __future__ import annotations

import base64
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.apiserver import write_kubeconfig
from tests.e2e.procs import Process, Processes
from tests.e2e.rest import Rest
from tests.support.server import free_port

COMMAND = str(Path(sys.executable).parent / "flink-failover")
_BIND_FLAGS = ("--bind", "--probe-bind", "--metrics-bind")


@dataclass
class Pod:
    name: str
    process: Process
    ports: dict[str, int]  # container port name (or number as text) -> loopback port
    folder: Path
    argv: list[str] = field(default_factory=list)

    def port(self, name: str) -> int:
        return self.ports[name]


def api_name(api: Rest) -> str:
    """A short name of the API server a pod lives on, for its log file."""
    return api.name or api.url.rsplit(":", 1)[-1]


def service_account_token(api: Rest, namespace: str, account: str, seconds: int = 86400) -> str:
    answer = api.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        },
    )
    return str(answer["status"]["token"])


def run_pod(
    procs: Processes,
    api: Rest,
    template: dict[str, Any],
    namespace: str,
    name: str,
    folder: Path,
    extra_env: dict[str, str] | None = None,
) -> Pod:
    """Start the pod template's one container; ``api`` is the API server it lives on (volumes, account)."""
    spec = template["spec"]
    (container,) = spec["containers"]
    folder.mkdir(parents=True, exist_ok=True)
    mounts = _volumes(api, spec, container, namespace, folder)
    ports = {str(p.get("name") or p["containerPort"]): free_port() for p in container.get("ports") or []}
    by_number = {
        str(p["containerPort"]): ports[str(p.get("name") or p["containerPort"])]
        for p in container.get("ports") or []
    }
    args = [_rewrite_arg(arg, mounts, by_number) for arg in container.get("args") or []]
    env = {
        item["name"]: _env_value(api, item, namespace, name, mounts) for item in container.get("env") or []
    }
    account = spec.get("serviceAccountName") or "default"
    if spec.get("automountServiceAccountToken", True):
        token = service_account_token(api, namespace, account)
        env["KUBECONFIG"] = str(write_kubeconfig(folder / "kubeconfig", api.url, api.ca, token, account))
    env.update(extra_env or {})
    argv = [COMMAND, *args]
    process = procs.start(f"{api_name(api)}-{name}", argv, env=env)
    return Pod(name, process, ports, folder, argv)


def _volumes(
    api: Rest, spec: dict[str, Any], container: dict[str, Any], namespace: str, folder: Path
) -> dict[str, Path]:
    """mount path -> local folder, filled as the kubelet fills it."""
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        local = folder / "volumes" / mount["name"]
        shutil.rmtree(local, ignore_errors=True)
        local.mkdir(parents=True)
        if "secret" in volume:
            source = api.get(f"/api/v1/namespaces/{namespace}/secrets/{volume['secret']['secretName']}")
            data = {k: base64.b64decode(v) for k, v in (source.get("data") or {}).items()}
            _write_items(local, data, volume["secret"].get("items"))
        elif "configMap" in volume:
            source = api.get(f"/api/v1/namespaces/{namespace}/configmaps/{volume['configMap']['name']}")
            data = {k: v.encode() for k, v in (source.get("data") or {}).items()}
            _write_items(local, data, volume["configMap"].get("items"))
        elif "emptyDir" not in volume:
            raise NotImplementedError(
                f"volume {mount['name']}: only secret, configMap and emptyDir are run here"
            )
        mounts[mount["mountPath"].rstrip("/")] = local
    return mounts


def _write_items(local: Path, data: dict[str, bytes], items: list[dict[str, str]] | None) -> None:
    chosen = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
    for key, path in chosen:
        if key not in data:
            raise KeyError(f"volume item {key} is not in its source (keys: {sorted(data)})")
        target = local / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data[key])


def _local_path(value: str, mounts: dict[str, Path]) -> str:
    for mount_path, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        if value == mount_path or value.startswith(mount_path + "/"):
            return str(local) + value[len(mount_path) :]
    return value


def _rewrite_arg(arg: str, mounts: dict[str, Path], ports: dict[str, int]) -> str:
    flag, sep, value = arg.partition("=")
    if not sep:
        return _local_path(arg, mounts)
    if flag in _BIND_FLAGS:
        _, _, port = value.rpartition(":")
        return f"{flag}=127.0.0.1:{ports.get(port, port)}"
    if flag == "--server-port":
        return f"{flag}={ports.get(value, value)}"
    return f"{flag}={_local_path(value, mounts)}"


def _env_value(api: Rest, item: dict[str, Any], namespace: str, pod: str, mounts: dict[str, Path]) -> str:
    if "value" in item:
        return _local_path(str(item["value"]), mounts)
    source = item.get("valueFrom") or {}
    if "fieldRef" in source:
        field_path = source["fieldRef"]["fieldPath"]
        return {"metadata.name": pod, "metadata.namespace": namespace}[field_path]
    if "secretKeyRef" in source:
        ref = source["secretKeyRef"]
        secret = api.get(f"/api/v1/namespaces/{namespace}/secrets/{ref['name']}")
        return base64.b64decode(secret["data"][ref["key"]]).decode()
    raise NotImplementedError(f"env {item['name']}: {sorted(source)} is not run here")
