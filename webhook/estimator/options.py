"""The estimator role's own ``serve`` options and the typed settings built from them (kept free of gRPC
and metrics imports: ``serve --help`` and the other roles load it too)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    client_ca: Path | None = None  # require and verify client certificates against it
    skip_client_verify: bool = False


@dataclass(frozen=True)
class EstimatorOptions:
    cluster: str  # the member's name in Karmada
    kubeconfig: str | None
    context: str | None
    log_level: str
    address: str  # gRPC host:port
    metrics_bind: str
    tls: TlsFiles | None
    grpc_workers: int
    refresh_s: float
    answer_cache: int = 256  # distinct requests answered once per snapshot (0: every call computes)


DEFAULT_PORT = 10352  # Karmada's --scheduler-estimator-port and its estimator's --server-port
DEFAULT_METRICS = "0.0.0.0:10351"
DEFAULT_REFRESH_S = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The estimator role's own options (``--kubeconfig``, ``--context``, ``--cluster``: shared, in roles)."""
    group = parser.add_argument_group("estimator role")
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
    group.add_argument(
        "--answer-cache-entries",
        type=int,
        default=256,
        help="estimator: distinct requests answered once per snapshot and shared by every caller asking "
        "the same (0: compute every call)",
    )


def from_args(args: argparse.Namespace) -> EstimatorOptions | str:
    """The typed settings, or a message saying what is wrong (the command exits 2 with it)."""
    if not args.cluster:
        return "--role estimator needs --cluster NAME (the member's name in Karmada)"
    tls = tls_files(args)
    if isinstance(tls, str):
        return tls
    return EstimatorOptions(
        cluster=args.cluster,
        kubeconfig=args.kubeconfig,
        context=args.context,
        log_level=args.log_level,
        address=f"{args.server_address}:{args.server_port}",
        metrics_bind=args.metrics_bind,
        tls=tls,
        grpc_workers=args.grpc_workers,
        refresh_s=max(0.0, args.state_refresh_seconds),
        answer_cache=max(0, args.answer_cache_entries),
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
