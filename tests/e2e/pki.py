"""Certificates and keys a loopback control plane needs, written once per stack.

One CA signs every loopback server (the API servers, the Karmada webhook, the aggregated API server);
a second CA signs the front proxy's client certificate, which the Karmada API server presents to the
aggregated API server (``--requestheader-*``); service accounts are signed by one EC key. Serving
certificates come from the product's own builder (``webhook.certs.pki``), the client certificate only
adds what that builder does not make: the client-auth usage.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.certs import pki

# every loopback server shares one serving certificate; the Karmada API server checks the aggregated
# API server by the name of its Service
SERVING_NAMES = ("127.0.0.1", "localhost", "karmada-aggregated-apiserver.karmada-system.svc")


@dataclass(frozen=True)
class StackPki:
    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.folder / "serving.crt"

    @property
    def serving_key(self) -> Path:
        return self.folder / "serving.key"

    @property
    def front_proxy_ca(self) -> Path:
        return self.folder / "front-proxy-ca.crt"

    @property
    def front_proxy_cert(self) -> Path:
        return self.folder / "front-proxy-client.crt"

    @property
    def front_proxy_key(self) -> Path:
        return self.folder / "front-proxy-client.key"

    @property
    def service_account_key(self) -> Path:
        return self.folder / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.folder / "sa.pub"

    def serving_dir(self, name: str) -> Path:
        """A folder with ``tls.crt`` / ``tls.key`` (what Karmada's webhook reads from ``--cert-dir``)."""
        folder = self.folder / name
        folder.mkdir(exist_ok=True)
        (folder / "tls.crt").write_bytes(self.serving_cert.read_bytes())
        (folder / "tls.key").write_bytes(self.serving_key.read_bytes())
        return folder


def write_pki(folder: Path) -> StackPki:
    folder.mkdir(parents=True, exist_ok=True)
    ca = pki.build_ca("flink-failover e2e CA")
    serving = pki.build_serving(ca, "kubernetes", "default", extras=SERVING_NAMES)
    front_ca = pki.build_ca("flink-failover e2e front-proxy CA")
    front = _client(front_ca, "front-proxy-client")
    sa_key = pki.new_key()
    out = StackPki(folder)
    out.ca.write_bytes(ca.cert_pem)
    out.serving_cert.write_bytes(serving.cert_pem)
    out.serving_key.write_bytes(serving.key_pem)
    out.front_proxy_ca.write_bytes(front_ca.cert_pem)
    out.front_proxy_cert.write_bytes(front.cert_pem)
    out.front_proxy_key.write_bytes(front.key_pem)
    out.service_account_key.write_bytes(pki.key_to_pem(sa_key))
    out.service_account_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return out


def _client(ca: pki.Issued, common_name: str) -> pki.Issued:
    key = pki.new_key()
    now = pki.utcnow() - pki.BACKDATE
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return pki.Issued(cert, key)
