"""A CA, a serving certificate for loopback and a client certificate, as PEM files for gRPC TLS tests."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.certs import pki


@dataclass(frozen=True)
class TlsSet:
    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path
    other_client_cert: Path  # signed by another CA
    other_client_key: Path


def _client(ca: pki.Issued, name: str) -> pki.Issued:
    key = pki.new_key()
    now = pki.utcnow()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return pki.Issued(cert, key)


def write_tls(out: Path) -> TlsSet:
    out.mkdir(parents=True, exist_ok=True)
    ca = pki.build_ca("estimator-test-ca")
    serving = pki.build_serving(
        ca, "karmada-scheduler-estimator-c1", "karmada-system", ["localhost", "127.0.0.1"]
    )
    client = _client(ca, "karmada-scheduler")
    stranger = _client(pki.build_ca("someone-else"), "karmada-scheduler")
    files = {
        "ca.crt": ca.cert_pem,
        "tls.crt": serving.cert_pem,
        "tls.key": serving.key_pem,
        "client.crt": client.cert_pem,
        "client.key": client.key_pem,
        "other.crt": stranger.cert_pem,
        "other.key": stranger.key_pem,
    }
    for name, data in files.items():
        (out / name).write_bytes(data)
    return TlsSet(*(out / n for n in files))
