"""`flink-failover review` as a newcomer uses it: from any directory, on files PowerShell or Notepad wrote,
on bare FlinkDeployments as well as AdmissionReviews, with kubectl-like output forms.

Each test of an item that used to break says so; it failed before the fix (traceback, relative default
policy path, or a policy file that needed apiVersion and kind).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.samples.make_storage import RESTORABLE, make
from tests.support.objects import JOB_ID, OTHER_JOB_ID, make_checkpoints
from tests.support.server import executable
from webhook.policy.load import DEFAULT_POLICY_FILE, load_policy
from webhook.policy.restore import RestorePolicy, policy_from_dict

SAMPLES = REPO / "tests" / "samples"
CKPT = "file:///tmp/flink-failover-samples/checkpoints"


@pytest.fixture(scope="module", autouse=True)
def sample_storage() -> None:
    make()


def run(
    *args: str, stdin: bytes | None = None, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "FLINK_FAILOVER_POLICY"}
    result = subprocess.run(
        [executable(), "review", *args],
        capture_output=True,
        input=stdin,
        cwd=cwd,
        env={**environ, **(env or {})},
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


def failover_object() -> dict[str, Any]:
    """The FlinkDeployment inside the failover sample: what a user has in hand, without a review around it."""
    review = json.loads((SAMPLES / "failover-create.json").read_text())
    obj: dict[str, Any] = review["request"]["object"]
    return obj


# --- Broken 1: UTF-16 / BOM input ------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig", "utf-32"])
def test_review_reads_what_powershell_and_notepad_write(tmp_path: Path, encoding: str) -> None:
    """Before: UnicodeDecodeError traceback, exit 1."""
    path = tmp_path / "review.json"
    path.write_bytes((SAMPLES / "failover-create.json").read_text().encode(encoding))
    result = run(str(path))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["response"]["patchType"] == "JSONPatch"
    yaml_path = tmp_path / "object.yaml"
    yaml_path.write_bytes(yaml.safe_dump(failover_object()).encode(encoding))
    assert run(str(yaml_path), "--print-object").returncode == 0


def test_undecodable_input_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    result = run(str(path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "policy" not in x]
    assert str(path) in line and "not UTF-8, UTF-16 or UTF-32" in line


def test_policy_file_in_utf16_loads(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_bytes("onMissingState: deny\n".encode("utf-16"))
    assert load_policy(path).on_missing_state == "deny"


# --- Broken 2: the default policy ships with the package -------------------------------------------------


def test_review_works_from_any_directory_and_says_which_policy(tmp_path: Path) -> None:
    """Before: 'cannot read policies/restore-policy.yaml' outside the repository."""
    result = run(str(SAMPLES / "failover-create.json"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"policy {DEFAULT_POLICY_FILE} (built-in default)" in result.stderr
    assert load_policy(DEFAULT_POLICY_FILE) == RestorePolicy()


def test_review_honours_flink_failover_policy_like_serve(tmp_path: Path) -> None:
    policy = tmp_path / "deny.yaml"
    policy.write_text("onMissingState: deny\n")
    sample = str(SAMPLES / "nothing-restorable.json")
    by_env = run(sample, env={"FLINK_FAILOVER_POLICY": str(policy)}, cwd=tmp_path)
    assert f"policy {policy} ($FLINK_FAILOVER_POLICY)" in by_env.stderr
    assert json.loads(by_env.stdout)["response"]["allowed"] is False  # deny, from the policy in the env
    by_flag = run(sample, "--policy", str(DEFAULT_POLICY_FILE), env={"FLINK_FAILOVER_POLICY": str(policy)})
    assert f"({'--policy'})" in by_flag.stderr
    assert json.loads(by_flag.stdout)["response"]["allowed"] is True  # --policy wins


@pytest.mark.slow
def test_default_policy_is_package_data(tmp_path: Path) -> None:
    import zipfile

    subprocess.run(
        [
            str(Path(executable()).parent / "python"),
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("flink_failover-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        assert "webhook/restore-policy.yaml" in whl.namelist()


# --- Broken 7: every policy field optional, apiVersion and kind included ---------------------------------


def test_a_policy_with_one_field_is_a_policy() -> None:
    """Before: 'apiVersion: must be flink-failover.io/v1alpha1, got None'."""
    assert policy_from_dict({"onMissingState": "deny"}).on_missing_state == "deny"
    assert policy_from_dict({}) == RestorePolicy()
    with pytest.raises(ValueError, match="apiVersion"):
        policy_from_dict({"apiVersion": "v1", "onMissingState": "deny"})
    with pytest.raises(ValueError, match="kind"):
        policy_from_dict({"kind": "ConfigMap"})
    text = DEFAULT_POLICY_FILE.read_text()
    assert "Every field is optional, apiVersion and kind included" in text


# --- Friction: bare objects, many documents, output forms, reasons ---------------------------------------


def test_bare_flinkdeployment_is_reviewed_as_a_create(tmp_path: Path) -> None:
    path = tmp_path / "fd.yaml"
    path.write_text(yaml.safe_dump(failover_object()))
    result = run(str(path), "--print-object", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    obj = yaml.safe_load(result.stdout)
    assert obj["spec"]["job"]["initialSavepointPath"] == f"{CKPT}/{RESTORABLE}/chk-8"
    from_stdin = run("-", "--print-object", stdin=json.dumps(failover_object()).encode())
    assert json.loads(from_stdin.stdout) == obj


def test_many_documents_answer_as_a_list_and_skips_say_why(tmp_path: Path) -> None:
    unlabelled = failover_object()
    unlabelled["metadata"] = {"name": "plain", "namespace": "team-a", "labels": {}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}}
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump_all([failover_object(), unlabelled, pod]))
    result = run(str(path))
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["kind"] == "List" and len(answer["items"]) == 3
    assert [i["response"]["allowed"] for i in answer["items"]] == [True, True, True]
    # Every answer is named, numbered in input order with its uid (issue 17 item 8).
    uids = [i["response"]["uid"] for i in answer["items"]]
    assert f"[1] FlinkDeployment analytics/orders (uid {uids[0]}): restored" in result.stderr
    assert f"[2] FlinkDeployment team-a/plain (uid {uids[1]}): skipped: no failover label" in result.stderr
    assert (
        f"[3] Pod team-a/p (uid {uids[2]}): skipped: not a FlinkDeployment, FlinkSessionJob or "
        "FlinkBlueGreenDeployment (core/Pod)" in result.stderr
    )
    as_yaml = run(str(path), "-o", "yaml")
    assert [d["kind"] for d in yaml.safe_load_all(as_yaml.stdout)] == ["AdmissionReview"] * 3
    heads = [line for line in as_yaml.stdout.splitlines() if line.startswith("# ")]
    assert heads == [
        f"# [1] FlinkDeployment analytics/orders (uid {uids[0]})",
        f"# [2] FlinkDeployment team-a/plain (uid {uids[1]})",
        f"# [3] Pod team-a/p (uid {uids[2]})",
    ]


def test_review_without_request_kind_says_so(tmp_path: Path) -> None:
    review = json.loads((SAMPLES / "failover-create.json").read_text())
    del review["request"]["kind"]
    path = tmp_path / "nokind.json"
    path.write_text(json.dumps(review))
    result = run(str(path))
    assert result.returncode == 0 and "skipped: request.kind missing" in result.stderr


def test_diff_shows_the_change(tmp_path: Path) -> None:
    path = tmp_path / "fd.json"
    path.write_text(json.dumps(failover_object()))
    result = run(str(path), "--diff", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    added = [
        line for line in result.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")
    ]
    assert any(f"initialSavepointPath: {CKPT}/{RESTORABLE}/chk-8" in line for line in added)
    assert result.stdout.startswith("--- FlinkDeployment ")


def test_update_with_old_object(tmp_path: Path) -> None:
    """Karmada re-applies its template: the UPDATE carries the restore over from --old."""
    restored = json.loads(run(str(SAMPLES / "failover-create.json"), "--print-object").stdout)
    template = failover_object()
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(restored))
    new.write_text(json.dumps(template))
    result = run(str(new), "--old", str(old), "--print-object")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["spec"]["job"]["initialSavepointPath"] == f"{CKPT}/{RESTORABLE}/chk-8"
    missing = run(str(new), "--operation", "update")
    assert missing.returncode == 2 and "needs --old FILE" in missing.stderr


def test_print_object_on_a_denial_exits_non_zero() -> None:
    result = run(str(SAMPLES / "bad-job-id.json"), "--print-object")
    assert result.returncode == 1
    assert "denied:" in result.stderr and "32 lowercase hex" in result.stderr
    assert result.stdout == ""
    plain = run(str(SAMPLES / "bad-job-id.json"))  # the answer itself was produced: exit 0
    assert plain.returncode == 0 and json.loads(plain.stdout)["response"]["allowed"] is False


def test_unusable_documents_are_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    result = run(str(path))
    assert result.returncode == 2 and "document 1 is not an AdmissionReview" in result.stderr
    empty = tmp_path / "empty.yaml"
    empty.write_text("---\n")
    assert run(str(empty)).returncode == 2


def test_bare_work_for_the_control_plane(tmp_path: Path) -> None:
    """The control-plane role takes a bare Work too, with the ResourceBindings from --objects."""
    sample = json.loads((SAMPLES / "controlplane" / "review-create-relocating.json").read_text())
    work = tmp_path / "work.yaml"
    work.write_text(yaml.safe_dump(sample["request"]["object"]))
    objects = str(SAMPLES / "controlplane" / "bindings.yaml")
    bare = run(str(work), "--role", "control-plane", "--objects", objects, "--print-object")
    wrapped = run(
        str(SAMPLES / "controlplane" / "review-create-relocating.json"),
        "--role",
        "control-plane",
        "--objects",
        objects,
        "--print-object",
    )
    assert bare.returncode == wrapped.returncode == 0, bare.stderr + wrapped.stderr
    assert yaml.safe_load(bare.stdout) == json.loads(wrapped.stdout)  # YAML in, YAML out (issue 30)
    manifest = yaml.safe_load(bare.stdout)["spec"]["workload"]["manifests"][0]
    assert manifest["metadata"]["labels"]["flink-failover.io/failover"] == "true"


# --- Issue 45: review reads what users have (a session cluster and its jobs in one file) ------------------

# The Flink operator's examples/basic-session-deployment-and-job.yaml, as a user has it, with the failover
# labels Karmada's failover would carry and the checkpoint directory set on the session cluster only.
OPERATOR_SESSION_EXAMPLE = """\
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata:
  name: basic-session-deployment-example
  labels: {labels}
spec:
  image: flink:1.20
  flinkVersion: v1_20
  jobManager:
    resource:
      memory: "2048m"
      cpu: 1
  taskManager:
    resource:
      memory: "2048m"
      cpu: 1
  serviceAccount: flink
  flinkConfiguration:
    execution.checkpointing.dir: {checkpoints}
---
apiVersion: flink.apache.org/v1beta1
kind: FlinkSessionJob
metadata:
  name: basic-session-job-example
  labels: {labels}
spec:
  deploymentName: basic-session-deployment-example
  job:
    jarURI: https://repo1.maven.org/maven2/org/apache/flink/flink-examples-streaming_2.12/1.16.1/flink-examples-streaming_2.12-1.16.1-TopSpeedWindowing.jar
    parallelism: 4
    upgradeMode: stateless
"""
FAILOVER_LABELS = json.dumps({"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB_ID})


def operator_example(checkpoints: Path, labels: str = FAILOVER_LABELS) -> list[dict[str, Any]]:
    text = OPERATOR_SESSION_EXAMPLE.format(labels=labels, checkpoints=f"file://{checkpoints}")
    docs: list[dict[str, Any]] = list(yaml.safe_load_all(text))
    return docs


def restored_from(stdout: str, name: str = "basic-session-job-example") -> str:
    objects = [d for d in yaml.safe_load_all(stdout) if d and d["metadata"]["name"] == name]
    assert len(objects) == 1, stdout
    return str(objects[0]["spec"]["job"].get("initialSavepointPath", ""))


def test_a_session_cluster_and_its_job_in_one_file(tmp_path: Path) -> None:
    """The operator's own example file: the job restores from the checkpoint directory set only on its
    session cluster in the same file (before: the cluster was not read, the job held suspended with
    'session cluster FlinkDeployment default/basic-session-deployment-example not read')."""
    make_checkpoints(tmp_path / "ckpt" / JOB_ID, [3, 5])
    path = tmp_path / "basic-session-deployment-and-job.yaml"
    path.write_text(
        OPERATOR_SESSION_EXAMPLE.format(labels=FAILOVER_LABELS, checkpoints=f"file://{tmp_path}/ckpt")
    )
    result = run(str(path), "--print-object")
    assert result.returncode == 0, result.stderr
    assert restored_from(result.stdout) == f"file://{tmp_path}/ckpt/{JOB_ID}/chk-5"
    # The session cluster itself is answered as before: the webhook leaves it alone.
    assert (
        "[1] FlinkDeployment default/basic-session-deployment-example (uid 00000000-0000-4000-8000-"
        "000000000001): skipped: session cluster without spec.job"
    ) in result.stderr
    assert "not read" not in result.stderr and "not found" not in result.stderr, result.stderr


def test_objects_takes_a_list_or_stream_of_mixed_kinds(tmp_path: Path) -> None:
    """--objects FILE: a `kind: List` of several kinds, or the operator's example file (a FlinkDeployment
    and a FlinkSessionJob); the FlinkDeployments are read, the rest passed over (before: exit 2, "is not a
    FlinkDeployment"). A file with no FlinkDeployment at all is still refused, naming it."""
    make_checkpoints(tmp_path / "ckpt" / JOB_ID, [2, 4])
    cluster, job = operator_example(tmp_path / "ckpt")
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(job))
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}
    listed = tmp_path / "list.yaml"
    listed.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [job, config_map, cluster]})
    )
    stream = tmp_path / "basic-session-deployment-and-job.yaml"
    stream.write_text(yaml.safe_dump_all([cluster, job]))
    for objects in (listed, stream):
        result = run(str(job_file), "--objects", str(objects), "--print-object")
        assert result.returncode == 0, result.stderr
        assert restored_from(result.stdout) == f"file://{tmp_path}/ckpt/{JOB_ID}/chk-4"
    jobs_only = tmp_path / "jobs-only.yaml"
    jobs_only.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [job, config_map]}))
    refused = run(str(job_file), "--objects", str(jobs_only))
    assert refused.returncode == 2 and refused.stdout == ""
    assert f"{jobs_only}: no FlinkDeployment in it" in refused.stderr, refused.stderr


def test_objects_and_the_reviewed_file_combined_objects_winning_on_a_clash(tmp_path: Path) -> None:
    """Both sources are read: a cluster only in FILE serves its job (before: not read), and one cluster
    named in both is taken from --objects."""
    make_checkpoints(tmp_path / "in-file" / JOB_ID, [2])
    make_checkpoints(tmp_path / "given" / JOB_ID, [7])
    make_checkpoints(tmp_path / "second" / OTHER_JOB_ID, [11])
    cluster, job = operator_example(tmp_path / "in-file")
    second_cluster, second_job = operator_example(tmp_path / "second")
    second_cluster["metadata"]["name"] = second_job["spec"]["deploymentName"] = "second-session"
    second_job["metadata"]["name"] = "second-job"
    second_job["metadata"]["labels"]["flink-failover.io/job-id"] = OTHER_JOB_ID
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump_all([cluster, job, second_cluster, second_job]))
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump(operator_example(tmp_path / "given")[0]))
    result = run(str(path), "--objects", str(objects), "--print-object")
    assert result.returncode == 0, result.stderr
    assert restored_from(result.stdout) == f"file://{tmp_path}/given/{JOB_ID}/chk-7"
    assert restored_from(result.stdout, "second-job") == f"file://{tmp_path}/second/{OTHER_JOB_ID}/chk-11"


def test_as_failover_passes_over_a_session_cluster_in_a_list(tmp_path: Path) -> None:
    """`kubectl get flinkdeployment,flinksessionjob -o yaml` under --as-failover: the session cluster is
    no job to fail over (one stderr line, not an error; before: exit 2, "needs a job that ran"), and its
    job restores from the cluster's checkpoint directory."""
    make_checkpoints(tmp_path / "ckpt" / JOB_ID, [8, 9])
    cluster, job = operator_example(tmp_path / "ckpt", labels="{}")
    cluster["status"] = {"jobManagerDeploymentStatus": "READY", "lifecycleState": "STABLE"}
    job["status"] = {"jobStatus": {"jobId": JOB_ID, "state": "RUNNING"}, "lifecycleState": "STABLE"}
    path = tmp_path / "got.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [cluster, job]}))
    result = run(str(path), "--as-failover", "--print-object")
    assert result.returncode == 0, result.stderr
    assert restored_from(result.stdout) == f"file://{tmp_path}/ckpt/{JOB_ID}/chk-9"
    skipped = [line for line in result.stderr.splitlines() if "not a job to fail over" in line]
    assert skipped == [
        "flink-failover review: [1] FlinkDeployment default/basic-session-deployment-example: skipped: "
        "session cluster (no spec.job): not a job to fail over"
    ], result.stderr
    alone = tmp_path / "cluster.yaml"
    alone.write_text(yaml.safe_dump(cluster))
    only = run(str(alone), "--as-failover")
    assert only.returncode == 0 and "skipped: session cluster (no spec.job)" in only.stderr, only.stderr


@pytest.mark.parametrize("cluster", [[], ["--cluster", "member2"]])
def test_a_missing_session_cluster_names_objects_as_the_fix(tmp_path: Path, cluster: list[str]) -> None:
    """Before: "... reads it only with the chart value member.readSessionClusters (serve
    --read-session-clusters) or with fencing (--cluster)", even when review was given --cluster."""
    job = operator_example(tmp_path / "ckpt")[1]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    result = run(str(path), *cluster)
    assert result.returncode == 0, result.stderr
    assert (
        "note: session cluster FlinkDeployment default/basic-session-deployment-example is not in "
        f"{path}: review reads a session job's cluster from the reviewed file and from --objects FILE"
    ) in result.stderr, result.stderr
    assert "(--cluster)" not in result.stderr and "readSessionClusters" not in result.stderr
    other = operator_example(tmp_path / "ckpt")[0]
    other["metadata"]["name"] = "another-session-cluster"
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump(other))
    given = run(str(path), *cluster, "--objects", str(objects))
    assert given.returncode == 0, given.stderr
    assert (
        "note: session cluster FlinkDeployment default/basic-session-deployment-example was not found in "
        f"the given objects (--objects {objects}) nor in {path}"
    ) in given.stderr, given.stderr
    assert "not read" not in given.stderr and "(--cluster)" not in given.stderr
