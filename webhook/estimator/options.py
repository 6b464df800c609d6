"""The estimator role's command-line options (kept free of gRPC and metrics imports: ``serve --help``
and the other roles load it too)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    client_ca: Path | None = None  # require and verify client certificates against it
    skip_client_verify: bool = False


DEFAULT_PORT = 10352  # Karmada's --scheduler-estimator-port and its estimator's --server-port
DEFAULT_METRICS = "0.0.0.0:10351"
DEFAULT_REFRESH_S = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The estimator role's options (``--kubeconfig``/``--context`` are shared with the other roles)."""
    group = parser.add_argument_group("estimator role")
    group.add_argument(
        "--cluster",
        "--cluster-name",  # Karmada's estimator spells it so
        dest="cluster",
        default=os.environ.get("FLINK_FAILOVER_CLUSTER", ""),
        help="the member cluster's name in Karmada; member: runs the fencing agent (one running copy), "
        "with --kubeconfig or the in-cluster account; estimator: requests for other clusters are refused",
    )
    group.add_argument("--server-port", type=int, default=DEFAULT_PORT, help="estimator: gRPC port")
    group.add_argument("--server-address", default="[::]", help="estimator: gRPC listen address")
    group.add_argument(
        "--metrics-bind",
        default=DEFAULT_METRICS,
        help="estimator: HTTP host:port for /metrics, /healthz, /readyz, /debug/estimates",
    )
    group.add_argument("--grpc-auth-cert-file", default="", help="estimator: serve TLS with this certificate")
    group.add_argument("--grpc-auth-key-file", default="", help="estimator: ... and this key")
    group.add_argument(
        "--grpc-client-ca-file", default="", help="estimator: require client certificates signed by this CA"
    )
    group.add_argument(
        "--insecure-skip-grpc-client-verify",
        action="store_true",
        help="estimator: with --grpc-client-ca-file, do not verify client certificates",
    )
    group.add_argument("--grpc-workers", type=int, default=8, help="estimator: gRPC worker threads")
    group.add_argument(
        "--state-refresh-seconds",
        type=float,
        default=DEFAULT_REFRESH_S,
        help="estimator: rebuild the node snapshot at most this often while pods churn",
    )


def tls_files(args: argparse.Namespace) -> TlsFiles | str | None:
    """The TLS option set, None for plaintext, or a message saying what is wrong."""
    cert, key, ca = args.grpc_auth_cert_file, args.grpc_auth_key_file, args.grpc_client_ca_file
    if bool(cert) != bool(key):
        return "--grpc-auth-cert-file and --grpc-auth-key-file go together"
    if not cert:
        return "--grpc-client-ca-file needs --grpc-auth-cert-file and --grpc-auth-key-file" if ca else None
    for path in (cert, key, ca):
        if path and not Path(path).is_file():
            return f"{path}: no such file"
    return TlsFiles(
        Path(cert), Path(key), Path(ca) if ca else None, bool(args.insecure_skip_grpc_client_verify)
    )
