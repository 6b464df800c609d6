"""`flink-failover certs ...` end to end: files, Secrets and caBundle through a Kubernetes API, real TLS."""

from __future__ import annotations

import base64
import os
import socket
import ssl
import stat
import sys
import threading
from pathlib import Path

import pytest

from tests.certs.fake_kube import FakeKube
from tests.support.server import generate_certs
from webhook.certs import pki, store
from webhook.cli import main

SERVICE, NAMESPACE = "flink-failover", "ff-system"
HOSTNAME = f"{SERVICE}.{NAMESPACE}.svc"


def generate(out: Path, *extra: str) -> int:
    return main(
        ["certs", "generate", "--service", SERVICE, "--namespace", NAMESPACE, "--out", str(out), *extra]
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def _no_incluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)


def test_generate_writes_four_files_with_private_keys_0600(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    assert generate(out, "--extra-san", "localhost", "--extra-san", "127.0.0.1") == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "ca.crt",
        "ca.key",
        "tls.crt",
        "tls.key",
    ]  # no temp files
    assert mode(out / "ca.key") == 0o600 and mode(out / "tls.key") == 0o600
    assert mode(out / "ca.crt") == 0o644 and mode(out / "tls.crt") == 0o644
    cert = pki.load_cert((out / "tls.crt").read_bytes())
    assert pki.dns_names(cert)[-2:] == ["localhost", "127.0.0.1"]
    assert pki.key_matches(cert, pki.load_key((out / "tls.key").read_bytes()))


def test_rerun_reuses_the_ca_and_keeps_a_good_certificate(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    assert generate(out) == 0
    before = store.read_dir(out)
    assert generate(out) == 0
    assert store.read_dir(out) == before
    assert generate(out, "--extra-san", "webhook.example.com") == 0  # names changed: new leaf, same CA
    after = store.read_dir(out)
    assert after[store.CA_CERT] == before[store.CA_CERT] and after[store.CA_KEY] == before[store.CA_KEY]
    assert after[store.TLS_CERT] != before[store.TLS_CERT]
    assert "webhook.example.com" in pki.dns_names(pki.load_cert(after[store.TLS_CERT]))


def test_a_ca_without_its_key_is_an_error_not_a_new_ca(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    assert generate(out) == 0
    (out / "ca.key").unlink()
    ca = (out / "ca.crt").read_bytes()
    assert generate(out) == 1
    assert "ca.key is missing" in capsys.readouterr().err
    assert (out / "ca.crt").read_bytes() == ca


def test_renew_respects_the_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "certs"
    assert generate(out, "--extra-san", "localhost") == 0
    first = store.read_dir(out)
    capsys.readouterr()
    assert main(["certs", "renew", "--out", str(out)]) == 0  # 365 days left, window 30
    assert "nothing to do" in capsys.readouterr().err
    assert store.read_dir(out) == first
    assert main(["certs", "renew", "--out", str(out), "--before-days", "366"]) == 0
    renewed = store.read_dir(out)
    assert renewed[store.TLS_KEY] != first[store.TLS_KEY] and renewed[store.CA_KEY] == first[store.CA_KEY]
    new = pki.load_cert(renewed[store.TLS_CERT])
    assert pki.dns_names(new) == pki.dns_names(pki.load_cert(first[store.TLS_CERT]))
    assert mode(out / "tls.key") == 0o600


def test_ca_bundle_prints_base64_ca(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "certs"
    assert generate(out) == 0
    capsys.readouterr()
    assert main(["certs", "ca-bundle", "--out", str(out)]) == 0
    assert base64.b64decode(capsys.readouterr().out.strip()) == (out / "ca.crt").read_bytes()


def test_console_script_contract_of_make_run(tmp_path: Path) -> None:
    """The exact command the Makefile's run target uses, through the installed console script."""
    exe = Path(sys.executable).with_name("flink-failover")
    if not exe.exists():
        pytest.skip(f"console script not installed beside {sys.executable}")
    out = generate_certs(tmp_path / "certs")
    names = pki.dns_names(pki.load_cert((out / "tls.crt").read_bytes()))
    assert "flink-failover.flink-failover.svc" in names and "localhost" in names and "127.0.0.1" in names


# --- real TLS: a client that trusts only ca.crt and checks the hostname ---------------------------


def _serve_once(cert_dir: Path) -> tuple[int, threading.Thread]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def accept() -> None:
        with listener:
            conn, _ = listener.accept()
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError):
                pass  # the client refused our certificate

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


def _connect(port: int, ca_file: Path, hostname: str) -> bytes:
    client = ssl.create_default_context(cafile=str(ca_file))  # trusts ca.crt only, checks the hostname
    assert client.check_hostname and client.verify_mode == ssl.CERT_REQUIRED
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        client.wrap_socket(raw, server_hostname=hostname) as tls,
    ):
        return tls.recv(2)


def test_tls_client_trusting_only_ca_crt_accepts_the_service_hostname(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    assert generate(out) == 0
    port, thread = _serve_once(out)
    assert _connect(port, out / "ca.crt", HOSTNAME) == b"ok"
    thread.join(10)


@pytest.mark.parametrize("hostname", ["flink-failover.other.svc", "evil.example.com"])
def test_tls_client_rejects_another_hostname(tmp_path: Path, hostname: str) -> None:
    out = tmp_path / "certs"
    assert generate(out) == 0
    port, thread = _serve_once(out)
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        _connect(port, out / "ca.crt", hostname)
    thread.join(10)


def test_tls_client_with_another_ca_rejects_the_certificate(tmp_path: Path) -> None:
    out, other = tmp_path / "certs", tmp_path / "other"
    assert generate(out) == 0
    assert generate(other) == 0  # a different CA for the same names
    port, thread = _serve_once(out)
    with pytest.raises(ssl.SSLCertVerificationError):
        _connect(port, other / "ca.crt", HOSTNAME)
    thread.join(10)


# --- Kubernetes API: Secrets and caBundle injection ------------------------------------------------


def test_generate_and_renew_through_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeKube() as kube:
        kubeconfig = str(kube.kubeconfig(tmp_path))
        secrets = ["--secret", "ff-tls", "--ca-secret", "ff-ca", "--kubeconfig", kubeconfig]
        assert generate(tmp_path / "run1", *secrets) == 0
        tls, ca = kube.secret(NAMESPACE, "ff-tls"), kube.secret(NAMESPACE, "ff-ca")
        assert tls is not None and ca is not None
        assert tls["type"] == "kubernetes.io/tls" and sorted(tls["data"]) == ["ca.crt", "tls.crt", "tls.key"]
        assert ca["type"] == "Opaque" and sorted(ca["data"]) == ["ca.crt", "ca.key"]  # the CA key stays apart
        assert tls["data"]["ca.crt"] == ca["data"]["ca.crt"]

        # a second run (a new Job pod: empty directory) reuses everything from the Secrets
        kube.requests.clear()
        assert generate(tmp_path / "run2", *secrets) == 0
        assert not [r for r in kube.requests if r[0] in ("POST", "PATCH")]
        assert kube.secret(NAMESPACE, "ff-tls") == tls

        renew = ["certs", "renew", "--out", str(tmp_path / "run3"), "--namespace", NAMESPACE, *secrets]
        assert main([*renew]) == 0  # not due
        assert kube.secret(NAMESPACE, "ff-tls") == tls
        assert main([*renew, "--force"]) == 0
        renewed = kube.secret(NAMESPACE, "ff-tls")
        assert renewed is not None and renewed["data"]["tls.crt"] != tls["data"]["tls.crt"]
        assert renewed["data"]["ca.crt"] == tls["data"]["ca.crt"]
        assert kube.secret(NAMESPACE, "ff-ca") == ca
        leaf = pki.load_cert(base64.b64decode(renewed["data"]["tls.crt"]))
        assert pki.issued_by(leaf, pki.load_cert(base64.b64decode(ca["data"]["ca.crt"])))
        assert mode(tmp_path / "run3" / "tls.key") == 0o600


@pytest.mark.parametrize("validating", [False, True])
def test_inject_sets_the_ca_bundle_on_every_webhook(tmp_path: Path, validating: bool) -> None:
    out = tmp_path / "certs"
    assert generate(out) == 0
    with FakeKube() as kube:
        kube.add_webhook_config("ff", ["a.flink-failover.io", "b.flink-failover.io"], validating=validating)
        key = next(iter(kube.objects))
        rules = [w["rules"] for w in kube.objects[key]["webhooks"]]
        args = [
            "certs",
            "inject",
            "--webhook-config",
            "ff",
            "--out",
            str(out),
            "--kubeconfig",
            str(kube.kubeconfig(tmp_path)),
        ]
        assert main(args + (["--validating"] if validating else [])) == 0
        obj = kube.objects[key]
        bundle = base64.b64encode((out / "ca.crt").read_bytes()).decode()
        assert [w["clientConfig"]["caBundle"] for w in obj["webhooks"]] == [bundle, bundle]
        assert [w["rules"] for w in obj["webhooks"]] == rules
        assert [w["clientConfig"]["service"]["path"] for w in obj["webhooks"]] == ["/mutate", "/mutate"]
        patches = [r for r in kube.requests if r[0] == "PATCH"]
        assert len(patches) == 1 and patches[0][2].startswith("application/json-patch+json")


def test_inject_into_a_missing_configuration_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    assert generate(out) == 0
    with FakeKube() as kube:
        args = [
            "certs",
            "inject",
            "--webhook-config",
            "nope",
            "--out",
            str(out),
            "--kubeconfig",
            str(kube.kubeconfig(tmp_path)),
        ]
        assert main(args) == 1
    assert "HTTP 404" in capsys.readouterr().err


def test_key_files_never_exist_with_looser_permissions(tmp_path: Path) -> None:
    """write_atomic creates the temporary file 0600 before any byte is written (umask cannot widen it)."""
    old = os.umask(0)
    try:
        store.write_atomic(tmp_path / "x.key", b"secret", store.KEY_MODE)
    finally:
        os.umask(old)
    assert mode(tmp_path / "x.key") == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["x.key"]


def test_inject_in_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a pod: the service account token and CA, KUBERNETES_SERVICE_HOST/PORT, TLS to the API server."""
    import kubernetes.config.incluster_config as incluster

    webhook_certs, apiserver_certs = tmp_path / "webhook", tmp_path / "apiserver"
    assert generate(webhook_certs) == 0
    assert (
        main(
            [
                "certs",
                "generate",
                "--service",
                "kubernetes",
                "--namespace",
                "default",
                "--out",
                str(apiserver_certs),
                "--extra-san",
                "127.0.0.1",
            ]
        )
        == 0
    )
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(apiserver_certs / "tls.crt", apiserver_certs / "tls.key")
    token = tmp_path / "token"
    token.write_text("in-cluster-token", encoding="utf-8")
    monkeypatch.setattr(incluster, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster, "SERVICE_CERT_FILENAME", str(apiserver_certs / "ca.crt"))
    with FakeKube(tls=server_tls) as kube:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(kube.port))
        kube.add_webhook_config("ff", ["a.flink-failover.io"])
        assert main(["certs", "inject", "--webhook-config", "ff", "--out", str(webhook_certs)]) == 0
        (obj,) = kube.objects.values()
        bundle = base64.b64encode((webhook_certs / "ca.crt").read_bytes()).decode()
        assert obj["webhooks"][0]["clientConfig"]["caBundle"] == bundle
        assert {a.lower() for a in kube.authorization} == {"bearer in-cluster-token"}


def test_single_secret_keeps_the_ca_key_with_the_pair(tmp_path: Path) -> None:
    with FakeKube() as kube:
        secrets = ["--secret", "ff-tls", "--kubeconfig", str(kube.kubeconfig(tmp_path))]
        assert generate(tmp_path / "a", *secrets) == 0
        tls = kube.secret(NAMESPACE, "ff-tls")
        assert tls is not None and sorted(tls["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
        renew = [
            "certs",
            "renew",
            "--out",
            str(tmp_path / "b"),
            "--namespace",
            NAMESPACE,
            "--force",
            *secrets,
        ]
        assert main(renew) == 0
        renewed = kube.secret(NAMESPACE, "ff-tls")
        assert renewed is not None
        assert renewed["data"]["ca.key"] == tls["data"]["ca.key"]
        assert renewed["data"]["tls.key"] != tls["data"]["tls.key"]


def test_readers_never_see_a_partial_file(tmp_path: Path) -> None:
    """While the pair is rewritten again and again, a reader always gets one complete certificate."""
    out = tmp_path / "certs"
    assert generate(out, "--extra-san", "localhost") == 0
    variants = [store.read_dir(out)]
    for n in range(3):  # different sizes: more names, longer PEM
        assert generate(out, *[f"--extra-san=host-{i}.example.com" for i in range(n * 20)]) == 0
        variants.append(store.read_dir(out))
    stop = threading.Event()
    seen: set[bytes] = set()
    errors: list[str] = []

    def read() -> None:
        while not stop.is_set():
            data = (out / "tls.crt").read_bytes()
            try:
                pki.load_cert(data)
                seen.add(data)
            except pki.CertError as exc:
                errors.append(str(exc))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for round_ in range(60):
            store.write_files(out, variants[round_ % len(variants)])
    finally:
        stop.set()
        reader.join(10)
    assert errors == []
    assert len(seen) >= 2
