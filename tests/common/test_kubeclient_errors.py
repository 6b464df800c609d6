"""Issue 24 item 7: a command given a kubeconfig it cannot read names the file (before: "Invalid
kube-config file. No configuration found.", with no word of which file)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.server import executable
from webhook.common.kubeclient import ApiFailure, ClientConfig, new_api_client


def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    made = new_api_client(ClientConfig(kubeconfig=str(missing)), "member cluster")
    assert isinstance(made, ApiFailure) and made.status == 0
    assert f"from {missing} (no such file)" in made.message


def test_an_unreadable_kubeconfig_is_named_without_claiming_it_is_missing(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n", encoding="utf-8")
    made = new_api_client(ClientConfig(kubeconfig=str(broken)), "member cluster")
    assert isinstance(made, ApiFailure)
    assert f"from {broken}:" in made.message and "no such file" not in made.message


def test_the_default_kubeconfig_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    made = new_api_client(ClientConfig(), "member cluster")
    assert isinstance(made, ApiFailure) and "from ~/.kube/config (no such file)" in made.message
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "elsewhere"))
    made = new_api_client(ClientConfig(), "member cluster")
    assert isinstance(made, ApiFailure) and f"$KUBECONFIG ({tmp_path / 'elsewhere'})" in made.message


def test_release_names_the_missing_kubeconfig(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    result = subprocess.run(
        [executable(), "release", "analytics/orders", "--kubeconfig", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert str(missing) in result.stderr and "no such file" in result.stderr, result.stderr
