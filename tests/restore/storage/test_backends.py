"""An allowed storage scheme without an installed fsspec backend is found at start-up, not during a
failover: the server refuses to start (``--require-storage-backends``, the chart's default) or warns in
its log and on /readyz. Which backends are missing depends on the installed extras; the expectations
are computed from the same environment, so the tests hold with or without them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.backends import BACKEND_NAMES, Running
from tests.support.objects import JOB_ID, apply, decode_patch, flink_deployment, flink_metadata, review
from tests.support.server import ApiServerClient, executable, generate_certs, serve
from webhook.common.paths import FSSPEC_PROTOCOL
from webhook.policy.load import DEFAULT_POLICY_FILE
from webhook.policy.restore import DEFAULT_ALLOWED_SCHEMES, KNOWN_SCHEMES
from webhook.restore.storage.backends import BACKENDS, missing_backends
from webhook.restore.storage.search import CheckpointStorage

MODULES = {"gs": "gcsfs", "abfs": "adlfs", "oss": "ossfs", "hdfs": "pyarrow", "s3": "s3fs"}


def installed(scheme: str) -> bool:
    protocol = FSSPEC_PROTOCOL[scheme]
    return protocol == "file" or importlib.util.find_spec(MODULES[protocol]) is not None


def test_missing_backends_match_what_is_installed() -> None:
    missing = {m.scheme: m for m in missing_backends(KNOWN_SCHEMES)}
    assert set(missing) == {s for s in KNOWN_SCHEMES if not installed(s)}
    assert "s3" not in missing and "file" not in missing  # the default install reads both
    for scheme, m in missing.items():
        extra = BACKENDS[FSSPEC_PROTOCOL[scheme]][0]
        assert f"install flink-failover[{extra}]" in m.message() and f"{scheme}://" in m.message()


def test_every_extra_named_exists_in_pyproject() -> None:
    import tomllib

    extras = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, module in BACKENDS.values():
        if extra:
            assert extra in extras, extra
            assert any(module.split(".")[0] in req or "pyarrow" in req for req in extras[extra])


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_certs(tmp_path_factory.mktemp("certs"))


def test_start_up_refuses_when_required(certs: Path, tmp_path: Path) -> None:
    """Before: the server started and /readyz said ready with gs, abfs, oss, hdfs unreadable. Every
    known scheme is allowed, so hdfs (no JVM or Hadoop client here) is missing even with the other
    backends installed (the dev extra installs them)."""
    policy = tmp_path / "every-scheme.yaml"
    policy.write_text(
        f"allowedSchemes: [{', '.join(KNOWN_SCHEMES)}]\nfencing: {{enabled: false}}\n", encoding="utf-8"
    )
    missing = missing_backends(KNOWN_SCHEMES)
    cmd = [
        executable(),
        "serve",
        "--cert-dir",
        str(certs),
        "--bind",
        "127.0.0.1:0",
        "--require-storage-backends",
    ]
    if not missing:
        pytest.skip("every storage backend is installed here: nothing to refuse")
    result = subprocess.run([*cmd, "--policy", str(policy)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    for m in missing:
        assert f"allowed scheme {m.scheme}:// has no fsspec backend" in result.stderr


def test_only_installed_schemes_start_and_readyz_warns_otherwise(certs: Path, tmp_path: Path) -> None:
    s3_only = tmp_path / "s3.yaml"
    s3_only.write_text("allowedSchemes: [s3, file]\n")
    with serve(certs, s3_only, tmp_path / "s3.log", extra=["--require-storage-backends"]) as server:
        client: ApiServerClient = server.client()
        status, body, _ = client.request("GET", "/readyz")
        assert (status, body) == (200, b"ready\n")
        client.close()
    with serve(certs, DEFAULT_POLICY_FILE, tmp_path / "warn.log") as server:
        client = server.client()
        status, body, _ = client.request("GET", "/readyz")
        client.close()
        logs = server.logs()
    assert status == 200
    lines = body.decode().splitlines()
    assert lines[0] == "ready"
    missing = missing_backends(DEFAULT_ALLOWED_SCHEMES)
    assert len(lines) == 1 + len(missing)
    for m in missing:
        assert f"warning: allowed scheme {m.scheme}:// has no fsspec backend" in body.decode()
        assert f"allowed scheme {m.scheme}:// has no fsspec backend" in logs


@pytest.mark.parametrize("scheme", ["oss", "hdfs"])
def test_fencing_on_a_storage_it_cannot_run_on_is_refused_at_start(
    certs: Path, tmp_path: Path, scheme: str
) -> None:
    """Issue 35: fencing on OSS (no server to test it against) or HDFS (a blocking client, never tested)
    ran unsafe; now the server refuses to start with the reason, and with fencing off it starts."""
    policy = tmp_path / "fenced.yaml"
    policy.write_text(f"allowedSchemes: [s3, {scheme}]\n", encoding="utf-8")
    cmd = [executable(), "serve", "--cert-dir", str(certs), "--bind", "127.0.0.1:0", "--policy", str(policy)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"fencing: enabled is true and allowedSchemes has {scheme}: " in result.stderr
    assert f"remove {scheme} from allowedSchemes or set fencing.enabled: false" in result.stderr
    policy.write_text(f"allowedSchemes: [s3, {scheme}]\nfencing: {{enabled: false}}\n", encoding="utf-8")
    with serve(certs, policy, tmp_path / "unfenced.log") as server:
        client = server.client()
        status, _, _ = client.request("GET", "/readyz")
        client.close()
    assert status == 200


# --- Issue 17 item 2: hdfs is ready only with a JVM, libhdfs and the Hadoop jars -----------------------


def _shared_object(tmp: Path, name: str) -> Path:
    """A real loadable shared object under the name Arrow looks for (a copy of the system's libz)."""
    import ctypes.util
    import shutil

    found = ctypes.util.find_library("z")
    assert found is not None
    source = next(p for d in ("/lib", "/usr/lib", "/lib64", "/usr/lib64") for p in Path(d).rglob(found))
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, tmp / name)
    return tmp / name


def test_hdfs_without_a_jvm_is_not_ready(tmp_path: Path) -> None:
    from webhook.restore.storage.backends import hadoop_client_problem

    assert "no loadable JVM (libjvm.so) (JAVA_HOME is not set)" in hadoop_client_problem({})
    java = tmp_path / "jdk"
    assert "under JAVA_HOME=" in hadoop_client_problem({"JAVA_HOME": str(java)})
    _shared_object(java / "lib" / "server", "libjvm.so")
    no_hdfs = hadoop_client_problem({"JAVA_HOME": str(java)})
    assert "no loadable libhdfs.so" in no_hdfs
    hadoop = tmp_path / "hadoop"
    _shared_object(hadoop / "lib" / "native", "libhdfs.so")
    env = {"JAVA_HOME": str(java), "HADOOP_HOME": str(hadoop)}
    assert "no Hadoop jars" in hadoop_client_problem(env)
    (hadoop / "bin").mkdir()
    (hadoop / "bin" / "hadoop").write_text("#!/bin/sh\n")
    assert hadoop_client_problem(env) == ""
    assert (
        hadoop_client_problem(
            {
                "JAVA_HOME": str(java),
                "ARROW_LIBHDFS_DIR": str(hadoop / "lib" / "native"),
                "CLASSPATH": "/opt/hadoop/share/hadoop/common/*",
            }
        )
        == ""
    )


def test_the_default_policy_allows_only_what_the_default_image_reads() -> None:
    """hdfs needs a JVM the slim image lacks: not allowed by default (before: allowed, and the chart's
    --require-storage-backends passed while every hdfs restore was denied)."""
    assert "hdfs" not in DEFAULT_ALLOWED_SCHEMES and "hdfs" in KNOWN_SCHEMES


# --- Issue 35 item 1: every backend the policy accepts, on a real server of it --------------------------


@pytest.mark.parametrize("storage_backend", BACKEND_NAMES, indirect=True)
def test_each_backend_round_trips_through_its_real_server(storage_backend: Running) -> None:
    """The support module's servers answer as the product reads them: what the test's client writes,
    the product's CheckpointStorage (built from the policy's storageOptions) lists, with a storage time."""
    from webhook.common.paths import StoragePath
    from webhook.restore.storage.backends import modified_time
    from webhook.restore.storage.search import CheckpointStorage

    root = storage_backend.bucket("roundtrip")
    storage_backend.write(f"{root}/job/chk-1/_metadata", b"flink")
    assert storage_backend.read(f"{root}/job/chk-1/_metadata") == b"flink"
    storage = CheckpointStorage(storage_backend.storage_options())
    folder = StoragePath.parse(f"{root}/job/chk-1")
    entries = storage.filesystem(folder).ls(folder.fs_path, detail=True)
    assert [str(e["name"]).rsplit("/", 1)[-1] for e in entries] == ["_metadata"]
    assert modified_time(entries[0]) is not None


@pytest.fixture(scope="module")
def served_certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_certs(tmp_path_factory.mktemp("served-certs"))


def _checkpoints(
    storage: Running, job_dir: str, ids: list[int], without_metadata: tuple[int, ...] = ()
) -> None:
    for n in ids:
        storage.write(f"{job_dir}/chk-{n}/state", b"x")
        if n not in without_metadata:
            storage.write(f"{job_dir}/chk-{n}/_metadata", flink_metadata(n))


@pytest.mark.parametrize("storage_backend", BACKEND_NAMES, indirect=True)
def test_a_served_failover_create_restores_the_newest_checkpoint_on_each_backend(
    storage_backend: Running, served_certs: Path, tmp_path: Path
) -> None:
    """Issue 35: on GCS through the policy's endpoint_url (gcp-storage-emulator) every failover admission
    missed its 5 s deadline and was refused (gcsfs asked the bucket's type over gRPC for 60 s first).
    Through the real served webhook, with the policy's storageOptions as a user writes them."""
    root = storage_backend.bucket("served")
    _checkpoints(storage_backend, f"{root}/ckpt/{JOB_ID}", [3, 41, 42], without_metadata=(42,))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        json.dumps(
            {
                "apiVersion": "flink-failover.io/v1alpha1",
                "kind": "RestorePolicy",
                "deadlineSeconds": 5,
                "storageOptions": storage_backend.storage_options(),
            }
        )
    )
    obj = flink_deployment(
        checkpoint_dir=f"{root}/ckpt",
        labels={"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB_ID},
    )
    with serve(served_certs, policy, tmp_path / "server.log") as server:
        client = server.client()
        try:
            response = client.admit(review(obj))["response"]
        finally:
            client.close()
    assert response["allowed"] is True, response.get("status")
    patched = apply(obj, decode_patch(response))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{root}/ckpt/{JOB_ID}/chk-41"


@pytest.mark.parametrize("storage_backend", BACKEND_NAMES, indirect=True)
def test_fencing_listings_see_what_another_cluster_wrote_after_the_first(storage_backend: Running) -> None:
    """Issue 35 item 2: gcsfs, adlfs (and ossfs) cached listings without expiry, so a FencingStore's second
    listing of a workload's folder (and of the whole tree) showed what the first did: another cluster's
    heartbeat and fence written in between were never seen. Another client writes them, as another
    cluster does."""
    from webhook.common.paths import StoragePath
    from webhook.fencing.records import FencingStore, Workload, fence_name, heartbeat_name
    from webhook.restore.storage.search import CheckpointStorage

    root = StoragePath.parse(storage_backend.bucket("records"))
    store = FencingStore(CheckpointStorage(storage_backend.storage_options()), "member1")
    records = root.child("flink-failover")
    folder = Workload("FlinkDeployment", "analytics", "orders").folder(root)
    store.beat(folder, {"n": 1})
    first = store.list(folder)
    first_tree = store.lanes.call(store.tree_call(records))
    assert [h.cluster for h in first.ownership.heartbeats] == ["member1"]
    other = storage_backend.client()
    for name in (heartbeat_name("member2"), fence_name(2, "member2")):
        data = b'{"cluster": "member2"}\n'
        if storage_backend.backend.name == "file":
            other.makedirs(folder.fs_path, exist_ok=True)
        other.pipe_file(folder.child(name).fs_path, data)
    second = store.list(folder).ownership
    assert sorted(h.cluster for h in second.heartbeats) == ["member1", "member2"]
    assert [(f.owner, f.epoch) for f in second.fences] == [("member2", 2)]
    tree = store.lanes.call(store.tree_call(records))[folder.fs_path].ownership
    assert sorted(h.cluster for h in tree.heartbeats) == ["member1", "member2"]
    assert first_tree[folder.fs_path].ownership.fences == ()


@pytest.mark.parametrize("storage_backend", BACKEND_NAMES, indirect=True)
def test_the_checkpoint_lookup_sees_a_checkpoint_another_client_wrote_after_the_first(
    storage_backend: Running,
) -> None:
    """Issue 35 item 2: a lookup through the same CheckpointStorage after a chk-N was written elsewhere
    (the stale copy's newest checkpoint) must restore it, not the one a cached listing showed."""
    from webhook.common.admission import parse_review
    from webhook.member.handler import MemberHandler
    from webhook.policy.restore import RestorePolicy

    root = storage_backend.bucket("fresh")
    _checkpoints(storage_backend, f"{root}/ckpt/{JOB_ID}", [41])
    handler = MemberHandler.from_policy(
        RestorePolicy(storage_options=storage_backend.storage_options(), deadline_seconds=5)
    )
    obj = flink_deployment(checkpoint_dir=f"{root}/ckpt", labels={"flink-failover.io/job-id": JOB_ID})
    try:
        first = apply(obj, decode_patch(handler(parse_review(review(obj))).to_review()["response"]))
        _checkpoints(storage_backend, f"{root}/ckpt/{JOB_ID}", [42, 43])
        second = apply(obj, decode_patch(handler(parse_review(review(obj))).to_review()["response"]))
    finally:
        handler.close()
    assert first["spec"]["job"]["initialSavepointPath"].endswith(f"{JOB_ID}/chk-41")
    assert second["spec"]["job"]["initialSavepointPath"].endswith(f"{JOB_ID}/chk-43")


# --- Issue 35: storage time as one clock, at the storage's resolution -----------------------------------


@pytest.mark.parametrize("storage_backend", BACKEND_NAMES, indirect=True)
def test_a_lease_never_runs_from_before_the_heartbeat_could_have_been_written(
    storage_backend: Running,
) -> None:
    """moto (as S3) and Azurite (as Azure Blob) give modification times in whole seconds, cut down: a
    heartbeat written at 12:00:00.9 lists as 12:00:00, so a lease of 30 s counted from it ran out at a
    clock of 12:00:30, 29.1 s after the renewal (released up to a second early). Heartbeats and fences on
    those backends now count from the end of their second; GCS and local times keep their fraction."""
    from webhook.common.paths import StoragePath
    from webhook.fencing.protocol import HoldOutcome, judge_hold
    from webhook.fencing.records import FencingStore, Workload
    from webhook.restore.storage.backends import modified_time
    from webhook.restore.storage.search import CheckpointStorage

    root = StoragePath.parse(storage_backend.bucket("times"))
    folder = Workload("FlinkDeployment", "analytics", "orders").folder(root)
    FencingStore(CheckpointStorage(storage_backend.storage_options()), "member1").beat(folder, {"n": 1})
    raw = modified_time(storage_backend.client().info(folder.child("heartbeat-member1.json").fs_path))
    assert raw is not None
    store = FencingStore(CheckpointStorage(storage_backend.storage_options()), "member2")
    (beat,) = store.list(folder).ownership.heartbeats
    whole_seconds = storage_backend.backend.name in ("s3", "azure")
    assert raw.microsecond == 0 or not whole_seconds  # what was measured on each server
    assert (beat.modified - raw).total_seconds() == (1 if whole_seconds and raw.microsecond == 0 else 0)
    lease = 30.0
    verdict = judge_hold("member2", 1, store.list(folder).ownership, raw + timedelta(seconds=lease), lease)
    assert verdict.outcome is (HoldOutcome.HOLD if whole_seconds else HoldOutcome.RELEASE)


@pytest.mark.parametrize("required", [False, True])
def test_a_missing_storage_server_skips_its_tests_or_fails_them_when_required(
    tmp_path: Path, required: bool
) -> None:
    """Without Azurite (`make azurite` not run) a test on it is skipped with the one-line reason; under
    REQUIRE_SHARED_DATA=1 (CI) it fails instead, and the other backends' tests run either way."""
    import os
    import sys

    from tests.support.repo import REPO

    (tmp_path / "conftest.py").write_text("from tests.conftest import storage_backend, storage_servers\n")
    test = tmp_path / "test_missing_server.py"
    test.write_text(
        "import pytest\n"
        "from tests.support.backends import Running\n"
        '@pytest.mark.parametrize("storage_backend", ["azure", "file"], indirect=True)\n'
        "def test_it(storage_backend: Running) -> None:\n"
        "    assert storage_backend.bucket()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "REQUIRE_SHARED_DATA"))}
    env.update(AZURITE_HOME=str(tmp_path / "nowhere"), PYTHONPATH=str(REPO))
    if required:
        env["REQUIRE_SHARED_DATA"] = "1"
    pytest_args = ["-q", "-rsf", "-p", "no:cacheprovider", "-p", "no:xdist", str(test)]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    out = result.stdout
    assert "Azurite not found under" in out and "run `make azurite`" in out, out[-2000:]
    if required:
        assert result.returncode == 1 and "1 passed, 1 error" in out, out[-2000:]
    else:
        assert result.returncode == 0 and "1 passed, 1 skipped" in out, out[-2000:]


@pytest.mark.parametrize("storage_backend", ["s3", "gcs", "azure"], indirect=True)
def test_fencing_calls_through_a_proxy_in_front_of_each_server_fail_within_their_deadline(
    storage_backend: Running,
) -> None:
    """What the fault tests build on (tests/support/tcpproxy.py in front of each server): records pass
    through the proxy, and a storage that accepts and never answers (``slow``) is a StorageError by the
    call's deadline, not a thread held for the client's own retries (gcsfs retries 6 times, the Azure SDK
    3 times)."""
    from tests.support.tcpproxy import tcp_proxy
    from webhook.common.paths import StoragePath
    from webhook.fencing.lanes import Lanes
    from webhook.fencing.records import FencingStore, Workload
    from webhook.restore.snapshots import StorageError

    root = StoragePath.parse(storage_backend.bucket("proxied"))
    folder = Workload("FlinkDeployment", "analytics", "orders").folder(root)
    with tcp_proxy(storage_backend.port) as proxy:
        options = storage_backend.storage_options(storage_backend.via(proxy.port))
        store = FencingStore(CheckpointStorage(options), "member1", Lanes(2.0))
        # The first calls build the client and connect (1-2 s on a loaded machine): a deadline no
        # machine misses; only the call to the slowed storage gets the lanes' 2 s.
        store.beat(folder, {"n": 1}, timeout=60)
        assert [h.cluster for h in store.list(folder, timeout=60).ownership.heartbeats] == ["member1"]
        proxy.slow(60)  # every answer 60 s late: a listing that waited for it would succeed
        with pytest.raises(StorageError):
            store.list(folder)
        proxy.heal()
