"""Pure certificate building: a private CA and the serving certificate it signs.

Nothing here touches the file system or the network, so every property (SANs, key usage, validity,
chain) can be checked in memory. kube-apiserver ignores the subject CN and verifies the SANs only,
so the SAN list is the part that must be right: ``NAME``, ``NAME.NS``, ``NAME.NS.svc`` and
``NAME.NS.svc.cluster.local`` plus any extras (an extra that parses as an IP address becomes an IP SAN).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DAYS = 365
DEFAULT_CA_DAYS = 3650
DEFAULT_RENEW_BEFORE_DAYS = 30
# Clocks in a cluster drift; a certificate valid from "now" can be rejected by a peer a few seconds behind.
BACKDATE = dt.timedelta(minutes=5)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_NAME = re.compile(
    r"^(\*\.)?[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$"
)

PrivateKey = ec.EllipticCurvePrivateKey


class CertError(ValueError):
    """Input that cannot produce a usable certificate (bad name, mismatched key, broken PEM)."""


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: PrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return key_to_pem(self.key)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_key() -> PrivateKey:
    """ECDSA P-256: accepted by kube-apiserver, Go and OpenSSL clients, and cheap in every handshake."""
    return ec.generate_private_key(ec.SECP256R1())


def key_to_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_key(pem: bytes) -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertError(f"not a PEM private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"unsupported key type {type(key).__name__} (expected an EC key)")
    return key


def load_cert(pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise CertError(f"not a PEM certificate: {exc}") from None


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The four names a Service is reached by; kube-apiserver uses ``NAME.NS.svc``."""
    for what, value in (("service", service), ("namespace", namespace)):
        if not _DNS_LABEL.match(value):
            raise CertError(f"{what} {value!r} is not a DNS-1123 label")
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def subject_alt_names(service: str, namespace: str, extras: Iterable[str] = ()) -> list[x509.GeneralName]:
    """Service names first, then the extras in order, duplicates removed; IP-looking extras become IP SANs."""
    names: list[x509.GeneralName] = []
    seen: set[str] = set()
    for value in [*service_dns_names(service, namespace), *extras]:
        value = value.strip()
        if not value or value.lower() in seen:
            continue
        seen.add(value.lower())
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(value)))
            continue
        except ValueError:
            pass
        if not _DNS_NAME.match(value) or len(value) > 253:
            raise CertError(f"extra SAN {value!r} is neither an IP address nor a DNS name")
        names.append(x509.DNSName(value.lower()))
    return names


def _validity(days: int, now: dt.datetime | None) -> tuple[dt.datetime, dt.datetime]:
    if days < 1:
        raise CertError(f"validity must be at least one day, got {days}")
    start = (now or utcnow()) - BACKDATE
    return start, start + BACKDATE + dt.timedelta(days=days)


def build_ca(common_name: str, days: int = DEFAULT_CA_DAYS, now: dt.datetime | None = None) -> Issued:
    """A self-signed CA that can sign leaf certificates only (path length 0)."""
    key = new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start, end = _validity(days, now)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = _signed(_builder(name, name, key, start, end, ca=True), key, key, ski)
    return Issued(cert, key)


def build_serving(
    ca: Issued,
    service: str,
    namespace: str,
    extras: Sequence[str] = (),
    days: int = DEFAULT_DAYS,
    key: PrivateKey | None = None,
    now: dt.datetime | None = None,
) -> Issued:
    """A TLS server certificate for the Service, signed by ``ca``; never outlives the CA."""
    key = key or new_key()
    start, end = _validity(days, now)
    end = min(end, ca.cert.not_valid_after_utc)
    if end <= start + BACKDATE:
        raise CertError("the CA expires before the serving certificate would start: renew the CA")
    sans = subject_alt_names(service, namespace, extras)
    ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service}.{namespace}.svc")])
    builder = (
        _builder(name, ca.cert.subject, key, start, end, ca=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
    )
    return Issued(_signed(builder, key, ca.key, ca_ski), key)


def _builder(
    subject: x509.Name, issuer: x509.Name, key: PrivateKey, start: dt.datetime, end: dt.datetime, *, ca: bool
) -> x509.CertificateBuilder:
    """What the CA and a serving certificate share: names, public key, a fresh serial, the validity, and
    what the key may be used for: a CA signs leaf certificates only (path length 0) and revocation
    lists; a serving certificate signs and enciphers in TLS handshakes."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            _key_usage("digital_signature", "key_cert_sign", "crl_sign")
            if ca
            else _key_usage("digital_signature", "key_encipherment"),
            critical=True,
        )
    )


_KEY_USAGES = (
    "digital_signature", "content_commitment", "key_encipherment", "data_encipherment", "key_agreement",
    "key_cert_sign", "crl_sign", "encipher_only", "decipher_only",
)  # fmt: skip


def _key_usage(*granted: str) -> x509.KeyUsage:
    """The key usage extension granting ``granted`` and nothing else (x509.KeyUsage wants every bit)."""
    return x509.KeyUsage(**{usage: usage in granted for usage in _KEY_USAGES})


def _signed(
    builder: x509.CertificateBuilder,
    key: PrivateKey,
    signer: PrivateKey,
    issuer_ski: x509.SubjectKeyIdentifier,
) -> x509.Certificate:
    """The certificate with its own key identifier and its issuer's (clients chain by key, not by name
    alone, which keeps a renewed CA of the same name apart), signed by ``signer`` with SHA-256."""
    return (
        builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(issuer_ski), critical=False
        )
        .sign(signer, hashes.SHA256())
    )


def check_ca(ca: Issued, now: dt.datetime | None = None) -> None:
    """Raise CertError unless ``ca`` is a usable CA whose key matches its certificate."""
    if not _same_key(ca.cert, ca.key):
        raise CertError("ca.key does not match ca.crt")
    try:
        bc = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        raise CertError("ca.crt has no BasicConstraints: not a CA") from None
    if not bc.ca:
        raise CertError("ca.crt is not a CA certificate (BasicConstraints ca=False)")
    if (now or utcnow()) >= ca.cert.not_valid_after_utc:
        raise CertError(f"the CA expired on {ca.cert.not_valid_after_utc.isoformat()}")


def _same_key(cert: x509.Certificate, key: PrivateKey) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def key_matches(cert: x509.Certificate, key: PrivateKey) -> bool:
    return _same_key(cert, key)


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """True when ``ca`` signed ``cert`` (signature check, not just a name comparison)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def dns_names(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [
        *san.get_values_for_type(x509.DNSName),
        *(str(ip) for ip in san.get_values_for_type(x509.IPAddress)),
    ]


def needs_renewal(
    cert: x509.Certificate, before_days: int = DEFAULT_RENEW_BEFORE_DAYS, now: dt.datetime | None = None
) -> bool:
    """True when ``cert`` expires within ``before_days`` (or already has)."""
    if before_days < 0:
        raise CertError(f"--before-days must not be negative, got {before_days}")
    return cert.not_valid_after_utc - (now or utcnow()) <= dt.timedelta(days=before_days)


def renewed_serving(
    ca: Issued, current: x509.Certificate, days: int = DEFAULT_DAYS, now: dt.datetime | None = None
) -> Issued:
    """Re-issue ``current`` from the same CA, same names, with a fresh key."""
    cn = current.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    common = str(cn[0].value) if cn else ""
    parts = common.split(".")
    if len(parts) < 3 or parts[2] != "svc":
        raise CertError(f"cannot tell the Service from the certificate subject {common!r}")
    service, namespace = parts[0], parts[1]
    base = set(service_dns_names(service, namespace))
    extras = [n for n in dns_names(current) if n not in base]
    return build_serving(ca, service, namespace, extras, days=days, now=now)
