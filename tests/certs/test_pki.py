"""Certificates built by webhook.certs: names, usages, chain, validity, CA reuse, renewal window."""

from __future__ import annotations

import datetime as dt
import ipaddress

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from webhook.certs import pki, store

SERVICE, NAMESPACE = "flink-failover", "ff-system"
NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def issued() -> store.Issuance:
    return store.generate({}, SERVICE, NAMESPACE, ["localhost", "127.0.0.1", "::1"], now=NOW)


def test_serving_sans_are_the_service_names_then_extras(issued: store.Issuance) -> None:
    san = issued.serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "flink-failover",
        "flink-failover.ff-system",
        "flink-failover.ff-system.svc",
        "flink-failover.ff-system.svc.cluster.local",
        "localhost",
    ]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]


def test_serving_key_usage_is_a_tls_server_leaf(issued: store.Issuance) -> None:
    ext = issued.serving.extensions
    bc = ext.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca is False
    ku = ext.get_extension_for_class(x509.KeyUsage).value
    assert ku.digital_signature and ku.key_encipherment
    assert not ku.key_cert_sign and not ku.crl_sign
    assert list(ext.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_ca_can_sign_and_is_self_signed(issued: store.Issuance) -> None:
    ca = pki.load_cert(issued.files[store.CA_CERT])
    bc = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca is True and bc.value.path_length == 0
    ku = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.key_cert_sign
    assert pki.issued_by(ca, ca)
    assert ca.not_valid_after_utc - NOW > dt.timedelta(days=3649)


def test_chain_verifies_for_the_service_hostname_only(issued: store.Issuance) -> None:
    ca = pki.load_cert(issued.files[store.CA_CERT])
    builder = PolicyBuilder().store(Store([ca])).time(NOW + dt.timedelta(days=1))
    chain = builder.build_server_verifier(x509.DNSName("flink-failover.ff-system.svc")).verify(
        issued.serving, []
    )
    assert chain[-1] == ca
    builder.build_server_verifier(x509.IPAddress(ipaddress.ip_address("127.0.0.1"))).verify(
        issued.serving, []
    )
    with pytest.raises(VerificationError):
        builder.build_server_verifier(x509.DNSName("other.ff-system.svc")).verify(issued.serving, [])
    # another CA does not vouch for it
    stranger = pki.build_ca("stranger", now=NOW)
    other = PolicyBuilder().store(Store([stranger.cert])).time(NOW + dt.timedelta(days=1))
    with pytest.raises(VerificationError):
        other.build_server_verifier(x509.DNSName("flink-failover.ff-system.svc")).verify(issued.serving, [])


def test_validity_is_backdated_and_bounded_by_the_ca(issued: store.Issuance) -> None:
    cert = issued.serving
    assert cert.not_valid_before_utc < NOW
    assert cert.not_valid_after_utc - NOW == dt.timedelta(days=365)
    ca = pki.build_ca("short", days=10, now=NOW)
    leaf = pki.build_serving(ca, SERVICE, NAMESPACE, days=365, now=NOW)
    assert leaf.cert.not_valid_after_utc == ca.cert.not_valid_after_utc


def test_existing_ca_is_reused_and_a_good_serving_pair_kept(issued: store.Issuance) -> None:
    again = store.generate(issued.files, SERVICE, NAMESPACE, ["localhost", "127.0.0.1", "::1"], now=NOW)
    assert not again.ca_created and not again.serving_issued
    assert again.files == issued.files
    # new names: a new serving certificate, same CA (a published caBundle stays valid)
    more = store.generate(issued.files, SERVICE, NAMESPACE, ["localhost"], now=NOW)
    assert not more.ca_created and more.serving_issued and more.reason == "SANs changed"
    assert more.files[store.CA_CERT] == issued.files[store.CA_CERT]
    assert more.files[store.CA_KEY] == issued.files[store.CA_KEY]
    assert pki.issued_by(more.serving, pki.load_cert(issued.files[store.CA_CERT]))
    forced = store.generate(
        issued.files, SERVICE, NAMESPACE, ["localhost", "127.0.0.1", "::1"], force=True, now=NOW
    )
    assert forced.serving_issued and forced.files[store.TLS_KEY] != issued.files[store.TLS_KEY]


def test_half_a_ca_is_refused_rather_than_replaced(issued: store.Issuance) -> None:
    only_cert = {store.CA_CERT: issued.files[store.CA_CERT]}
    with pytest.raises(pki.CertError, match=r"ca\.key is missing"):
        store.generate(only_cert, SERVICE, NAMESPACE)
    mismatched = {store.CA_CERT: issued.files[store.CA_CERT], store.CA_KEY: pki.key_to_pem(pki.new_key())}
    with pytest.raises(pki.CertError, match="does not match"):
        store.generate(mismatched, SERVICE, NAMESPACE)


def test_renew_only_inside_the_window(issued: store.Issuance) -> None:
    expiry = issued.serving.not_valid_after_utc
    early = store.renew(issued.files, before_days=30, now=expiry - dt.timedelta(days=31))
    assert not early.serving_issued and early.files == issued.files
    due = store.renew(issued.files, before_days=30, now=expiry - dt.timedelta(days=29))
    assert due.serving_issued
    new = due.serving
    assert new.serial_number != issued.serving.serial_number
    assert due.files[store.TLS_KEY] != issued.files[store.TLS_KEY]  # fresh key
    assert due.files[store.CA_CERT] == issued.files[store.CA_CERT]
    assert pki.dns_names(new) == pki.dns_names(issued.serving)
    assert pki.issued_by(new, pki.load_cert(issued.files[store.CA_CERT]))
    expired = store.renew(issued.files, before_days=0, now=expiry + dt.timedelta(seconds=1))
    assert expired.serving_issued


def test_renew_without_a_ca_fails() -> None:
    with pytest.raises(pki.CertError, match="no CA"):
        store.renew({})


@pytest.mark.parametrize(
    ("service", "namespace", "extra"),
    [
        ("Bad_Name", "ns", ""),
        ("svc", "ns.with.dots", ""),
        ("svc", "ns", "not a name"),
        ("svc", "ns", "-x.com"),
    ],
)
def test_invalid_names_are_rejected(service: str, namespace: str, extra: str) -> None:
    with pytest.raises(pki.CertError):
        pki.subject_alt_names(service, namespace, [extra] if extra else [])


def test_ca_bundle_is_base64_of_ca_crt(issued: store.Issuance) -> None:
    import base64

    assert base64.b64decode(store.ca_bundle(issued.files)) == issued.files[store.CA_CERT]
    with pytest.raises(pki.CertError):
        store.ca_bundle({store.CA_CERT: b"garbage"})
