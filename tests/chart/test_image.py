"""The Dockerfile (no container engine here: checked as text) and its agreement with the chart."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.chart.test_chart import one, render
from tests.conftest import REPO

DOCKERFILE = REPO / "Dockerfile"


def stages() -> list[list[tuple[str, str]]]:
    """Instructions per build stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    out: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        if op.upper() == "FROM":
            out.append([])
        if out:
            out[-1].append((op.upper(), rest.strip()))
    return out


def test_multi_stage_with_a_slim_python_311_base() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?", base.group(1)), base
    builder, final = stages()
    assert builder[0] == ("FROM", "${PYTHON_IMAGE} AS builder")
    assert final[0] == ("FROM", "${PYTHON_IMAGE}")  # same interpreter path as the venv built in the builder
    assert any(op == "RUN" and "pip wheel" in arg and "-c constraints.txt" in arg for op, arg in builder)
    assert any(op == "COPY" and "constraints.txt" in arg.split() for op, arg in builder)


def test_final_stage_has_no_compilers_and_runs_as_a_numeric_non_root_user() -> None:
    final = stages()[-1]
    runs = " ".join(arg for op, arg in final if op == "RUN")
    for tool in ("build-essential", "gcc", "apt-get install", "pip install"):
        assert tool not in runs
    copies = [arg for op, arg in final if op == "COPY"]
    assert any(arg.startswith("--from=builder /opt/flink-failover") for arg in copies)
    (user,) = [arg for op, arg in final if op == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and (not gid or gid.isdigit())
    ops = [op for op, _ in final]
    assert ops.index("USER") > max(i for i, op in enumerate(ops) if op in ("RUN", "COPY"))
    (entry,) = [arg for op, arg in final if op == "ENTRYPOINT"]
    assert entry == '["flink-failover"]'


def test_dockerignore_keeps_keys_and_caches_out() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines() if line.strip()}
    assert {".git", ".venv", ".cache", "certs", "*.key"} <= ignored
    for needed in ("pyproject.toml", "webhook", "README.md", "constraints.txt"):
        assert needed not in ignored


def test_chart_runs_the_image_user_and_its_entry_point(helm: str, tmp_path: Path) -> None:
    (user,) = [arg for op, arg in stages()[-1] if op == "USER"]
    uid, _, gid = user.partition(":")
    docs = render(helm, tmp_path)
    pod: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)
    assert pod["securityContext"]["runAsGroup"] == int(gid or uid)
    (container,) = pod["containers"]
    assert "command" not in container  # the image's ENTRYPOINT (flink-failover) runs the args
    for job in (one(docs, "Job", n["metadata"]["name"]) for n in docs if n["kind"] == "Job"):
        (c,) = job["spec"]["template"]["spec"]["containers"]
        assert "command" not in c and c["args"][0] == "certs"


@pytest.mark.parametrize("instruction", ["ENV", "EXPOSE"])
def test_runtime_defaults_match_the_chart(instruction: str) -> None:
    final = stages()[-1]
    args = " ".join(arg for op, arg in final if op == instruction)
    if instruction == "EXPOSE":
        from webhook.estimator.options import DEFAULT_METRICS, DEFAULT_PORT

        assert args.split() == ["8443", str(DEFAULT_PORT), DEFAULT_METRICS.rsplit(":", 1)[1]]
    else:
        env = dict(item.split("=", 1) for item in shlex.split(args))
        assert env["FLINK_FAILOVER_CERT_DIR"] == "/etc/flink-failover/certs"
        # the default policy ships inside the package; the chart mounts its ConfigMap and passes --policy
        assert "FLINK_FAILOVER_POLICY" not in env
        assert env["TMPDIR"] == "/tmp"


def test_extras_build_argument_selects_the_storage_backends() -> None:
    """The image carries the backends of every scheme the default policy allows (the chart refuses to
    start otherwise); ``--build-arg EXTRAS=`` builds an S3-and-files-only image."""
    import tomllib

    from webhook.common.paths import FSSPEC_PROTOCOL
    from webhook.policy.restore import DEFAULT_ALLOWED_SCHEMES
    from webhook.restore.storage.backends import BACKENDS

    text = (REPO / "Dockerfile").read_text()
    default = re.search(r"^ARG EXTRAS=(\S*)$", text, re.M)
    assert default is not None
    baked = set(default.group(1).split(","))
    needed = {BACKENDS[FSSPEC_PROTOCOL[s]][0] for s in DEFAULT_ALLOWED_SCHEMES} - {""}
    assert needed <= baked
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert baked <= set(extras)
    builder = stages()[0]
    assert ("ARG", "EXTRAS") in builder
    run = " ".join(arg for op, arg in builder if op == "RUN")
    assert '".${EXTRAS:+[$EXTRAS]}"' in run and '"flink-failover${EXTRAS:+[$EXTRAS]}"' in run


# --- issue 30: a documented build with whatever OCI builder is present ---------------------------------


def _make(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    make = shutil.which("make")
    assert make, "the suite runs through make"
    env = {**os.environ, **({"PATH": path} if path is not None else {})}
    return subprocess.run([make, "-s", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def test_make_image_without_a_builder_says_which_it_looked_for_and_fails(tmp_path: Path) -> None:
    result = _make("image", path=str(tmp_path))  # a PATH with nothing on it
    assert result.returncode != 0
    for builder in ("docker", "podman", "buildah"):
        assert f"make: {builder}: not on PATH" in result.stderr
    assert "no working OCI image builder (looked for docker podman buildah)" in result.stderr


@pytest.mark.parametrize("builder", ["docker", "podman", "buildah"])
def test_make_image_builds_and_pushes_the_chart_s_app_version(builder: str) -> None:
    import yaml

    version = yaml.safe_load((REPO / "charts" / "flink-failover" / "Chart.yaml").read_text())["appVersion"]
    image = "registry.example.com/platform/flink-failover"
    build = _make("-n", "image", f"OCI_BUILDER={builder}", f"IMAGE={image}")
    assert build.returncode == 0, build.stderr
    assert build.stdout.split() == [builder, "build", "-f", "Dockerfile", "-t", f"{image}:{version}", "."]
    extras = _make("-n", "image", f"OCI_BUILDER={builder}", f"IMAGE={image}", "EXTRAS=")
    assert "--build-arg EXTRAS= ." in extras.stdout  # S3 and local files only
    push = _make("-n", "image-push", f"OCI_BUILDER={builder}", f"IMAGE={image}")
    assert push.stdout.split() == [builder, "push", f"{image}:{version}"]


def test_the_install_docs_tell_how_to_build_and_push_the_image() -> None:
    install = (REPO / "docs" / "install.md").read_text()
    assert "make image IMAGE=" in install and "make image-push IMAGE=" in install
    assert "ghcr.io" not in install + (REPO / "charts" / "flink-failover" / "README.md").read_text()
