"""The certificate directory (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``) and the operations on it.

Files are replaced atomically (write a temporary file in the same directory, fsync, rename), so a
server that re-reads them never sees half a PEM; private keys are created with mode 0600 and never
exist with looser permissions, not even as temporary files.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from webhook.certs import pki

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
FILES = (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)
SECRET_FILES = frozenset(FILES)
KEY_MODE = 0o600
CERT_MODE = 0o644


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` with ``data`` in one rename; the temporary file has ``mode`` from its creation."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_dir(directory: Path) -> dict[str, bytes]:
    """The certificate files present in ``directory``."""
    out: dict[str, bytes] = {}
    for name in FILES:
        path = directory / name
        if path.is_file():
            out[name] = path.read_bytes()
    return out


def write_files(directory: Path, files: Mapping[str, bytes]) -> list[str]:
    """Write the given files (keys 0600); returns the names whose content changed. The key goes
    before its certificate so the pair is complete when the certificate (what readers look at) lands."""
    changed: list[str] = []
    for name in (CA_KEY, CA_CERT, TLS_KEY, TLS_CERT):
        if name not in files:
            continue
        path = directory / name
        mode = KEY_MODE if name.endswith(".key") else CERT_MODE
        if path.is_file() and path.read_bytes() == files[name]:
            if name.endswith(".key"):
                os.chmod(path, KEY_MODE)
            continue
        write_atomic(path, files[name], mode)
        changed.append(name)
    return changed


def load_ca(files: Mapping[str, bytes]) -> pki.Issued | None:
    """The CA in ``files``; None when neither half exists; CertError when only one does or it is unusable."""
    has_cert, has_key = CA_CERT in files, CA_KEY in files
    if not has_cert and not has_key:
        return None
    if has_cert != has_key:
        missing = CA_KEY if has_cert else CA_CERT
        raise pki.CertError(f"{missing} is missing: refusing to replace a CA that may already be published")
    ca = pki.Issued(pki.load_cert(files[CA_CERT]), pki.load_key(files[CA_KEY]))
    pki.check_ca(ca)
    return ca


@dataclass
class Issuance:
    """The certificate files after generate or renew, and what was changed to get them."""

    files: dict[str, bytes]
    ca_created: bool = False
    serving_issued: bool = False
    reason: str = ""

    @property
    def serving(self) -> x509.Certificate:
        return pki.load_cert(self.files[TLS_CERT])


def _serving_reusable(
    files: Mapping[str, bytes],
    ca: pki.Issued,
    wanted: Sequence[str],
    before_days: int,
    now: dt.datetime | None,
) -> str:
    """Empty when the existing serving pair can stay, else why it cannot."""
    if TLS_CERT not in files or TLS_KEY not in files:
        return "no serving certificate yet"
    try:
        cert, key = pki.load_cert(files[TLS_CERT]), pki.load_key(files[TLS_KEY])
    except pki.CertError as exc:
        return f"existing serving pair unreadable ({exc})"
    if not pki.key_matches(cert, key):
        return "tls.key does not match tls.crt"
    if not pki.issued_by(cert, ca.cert):
        return "tls.crt was not issued by this CA"
    if sorted(pki.dns_names(cert)) != sorted(wanted):
        return "SANs changed"
    if pki.needs_renewal(cert, before_days, now):
        return f"expires within {before_days} days"
    return ""


def generate(
    files: Mapping[str, bytes],
    service: str,
    namespace: str,
    extras: Sequence[str] = (),
    days: int = pki.DEFAULT_DAYS,
    ca_days: int = pki.DEFAULT_CA_DAYS,
    before_days: int = pki.DEFAULT_RENEW_BEFORE_DAYS,
    force: bool = False,
    now: dt.datetime | None = None,
) -> Issuance:
    """Reuse the CA in ``files`` (or create one) and make sure a matching serving certificate exists.

    An existing serving pair is kept when it is from this CA, carries exactly the requested names and
    is outside the renewal window; ``force`` re-issues it anyway. The CA is never replaced.
    """
    out = dict(files)
    ca = load_ca(files)
    outcome = Issuance(out)
    if ca is None:
        ca = pki.build_ca(f"{service}.{namespace} webhook CA", days=ca_days, now=now)
        out[CA_CERT], out[CA_KEY] = ca.cert_pem, ca.key_pem
        outcome.ca_created = True
        for stale in (TLS_CERT, TLS_KEY):
            out.pop(stale, None)
    wanted = [str(n.value) for n in pki.subject_alt_names(service, namespace, extras)]
    reason = "forced" if force else _serving_reusable(out, ca, wanted, before_days, now)
    if reason:
        serving = pki.build_serving(ca, service, namespace, extras, days=days, now=now)
        out[TLS_CERT], out[TLS_KEY] = serving.cert_pem, serving.key_pem
        outcome.serving_issued, outcome.reason = True, reason
    return outcome


def renew(
    files: Mapping[str, bytes],
    before_days: int = pki.DEFAULT_RENEW_BEFORE_DAYS,
    days: int = pki.DEFAULT_DAYS,
    force: bool = False,
    now: dt.datetime | None = None,
) -> Issuance:
    """Re-issue the serving certificate from the same CA (fresh key, same names) when it expires within
    ``before_days``; otherwise return ``files`` unchanged."""
    ca = load_ca(files)
    if ca is None:
        raise pki.CertError("no CA found: run `flink-failover certs generate` first")
    if TLS_CERT not in files:
        raise pki.CertError("no tls.crt found: run `flink-failover certs generate` first")
    current = pki.load_cert(files[TLS_CERT])
    outcome = Issuance(dict(files))
    if not force and not pki.needs_renewal(current, before_days, now):
        outcome.reason = (
            f"valid until {current.not_valid_after_utc.isoformat()}, outside the {before_days}-day window"
        )
        return outcome
    serving = pki.renewed_serving(ca, current, days=days, now=now)
    outcome.files[TLS_CERT], outcome.files[TLS_KEY] = serving.cert_pem, serving.key_pem
    outcome.serving_issued = True
    outcome.reason = "forced" if force else f"expires {current.not_valid_after_utc.isoformat()}"
    return outcome


def ca_bundle(files: Mapping[str, bytes]) -> str:
    """base64 of ca.crt, as a webhook's ``clientConfig.caBundle`` wants it."""
    if CA_CERT not in files:
        raise pki.CertError("no ca.crt found")
    pki.load_cert(files[CA_CERT])  # refuse to publish something that is not a certificate
    return base64.b64encode(files[CA_CERT]).decode("ascii")
