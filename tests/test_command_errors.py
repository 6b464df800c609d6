"""Issue 30: a platform engineer's first day. Every command that could not do its job says why on stderr
and exits non-zero; what the commands print is true (help, sample output, output form); what every field
being optional promises holds. Each test failed on the code before the issue."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.controlplane import fakeapi
from tests.samples.make_storage import make
from tests.support.kube import write_kubeconfig
from tests.support.production import wait_for
from tests.support.server import RunningServer, serve
from tests.test_review_forms import SAMPLES, failover_object, run
from webhook.cli import build_parser, main
from webhook.fencing.flinkapi import PLURALS
from webhook.policy.load import load_policy
from webhook.policy.restore import RestorePolicy
from webhook.server.config import MAX_BODY_BYTES


@pytest.fixture(scope="module", autouse=True)
def sample_storage() -> None:
    make()


@pytest.fixture
def dead_kubeconfig(tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig whose API server refuses every connection: a port bound, never listening."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        yield write_kubeconfig(tmp_path / "dead.kubeconfig", f"http://127.0.0.1:{port}")


# --- item 2: status could not list, and said so on stdout with exit 0 ----------------------------------


def test_status_that_cannot_list_exits_1_with_the_reason_on_stderr(
    dead_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--kubeconfig", str(dead_kubeconfig), "--held"]) == 1
    out, err = capsys.readouterr()
    assert "cannot list" not in out and out == ""
    for plural in PLURALS.values():
        assert f"flink-failover status: cannot list {plural}:" in err


def test_status_json_that_cannot_list_exits_1_and_names_the_problems(
    dead_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--kubeconfig", str(dead_kubeconfig), "-o", "json"]) == 1
    out, err = capsys.readouterr()
    body = json.loads(out)
    assert body["jobs"] == [] and len(body["problems"]) == len(PLURALS)
    assert "cannot list flinkdeployments" in err


def test_status_on_a_cluster_without_an_optional_crd_notes_it_and_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No FlinkBlueGreenDeployment CRD (operator before 1.14) is usual: a note, not a failure."""
    running = fakeapi.start(
        fakeapi.flink_collection("flinkdeployments"), extra=(fakeapi.flink_collection("flinksessionjobs"),)
    )
    try:
        kubeconfig = running.kubeconfig(tmp_path / "member.kubeconfig")
        assert main(["status", "--kubeconfig", str(kubeconfig)]) == 0
        out, err = capsys.readouterr()
        assert out == ""
        assert "note: this cluster serves no flinkbluegreendeployments" in err
        assert "no Flink jobs on this cluster" in err
    finally:
        running.stop()


def test_status_refuses_a_cluster_name_karmada_would_refuse(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--cluster", "Member_1"]) == 2
    assert "--cluster: cluster name 'Member_1' is not a DNS subdomain" in capsys.readouterr().err


# --- item 6: status --help --------------------------------------------------------------------------------


def _help(*command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[command[0]].format_help()  # type: ignore[attr-defined,no-any-return]


def test_status_help_is_for_users_and_names_every_kind_it_lists() -> None:
    text = _help("status")
    for internal in ("`describe`", "`collect`", "is pure", "is the edge"):
        assert internal not in text
    flat = " ".join(text.split())
    for kind in PLURALS:
        assert kind in flat.split("positional arguments")[0], kind
    assert "Exit 0" in text and "1 when something could not be" in flat


@pytest.mark.parametrize("command", ["serve", "review", "placement", "release", "status", "certs"])
def test_no_help_shows_an_empty_default(command: str) -> None:
    assert "(default: )" not in " ".join(_help(command).split())


# --- item 7: smaller untruths ---------------------------------------------------------------------------


def test_the_quick_start_sample_names_the_checkpoint_id_flink_wrote() -> None:
    result = run(str(SAMPLES / "failover-create.json"))
    assert result.returncode == 0, result.stderr
    assert "(checkpoint id 8)" in result.stderr, result.stderr


def test_as_failover_of_a_deployment_says_it_is_not_a_flink_kind(tmp_path: Path) -> None:
    path = tmp_path / "deployment.yaml"
    path.write_text(
        yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}})
    )
    result = run(str(path), "--as-failover", "--diff")
    assert result.returncode == 2
    assert "Deployment of apps is not a Flink kind" in result.stderr
    assert "jobStatus" not in result.stderr


def test_diff_and_print_object_answer_yaml_input_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(failover_object()))
    diff = run(str(path), "--diff")
    assert diff.returncode == 0, diff.stderr
    added = [
        line for line in diff.stdout.splitlines() if line.startswith("+") and "initialSavepointPath" in line
    ]
    assert added and added[0].lstrip("+ ").startswith("initialSavepointPath: "), diff.stdout
    printed = run(str(path), "--print-object")
    assert yaml.safe_load(printed.stdout)["spec"]["job"]["initialSavepointPath"].endswith("/chk-8")
    assert not printed.stdout.lstrip().startswith("{")
    as_json = run(str(path), "--diff", "-o", "json")
    assert '"initialSavepointPath": ' in as_json.stdout
    # JSON in, JSON out; the AdmissionReview answer stays JSON (a wire object)
    assert run(str(SAMPLES / "failover-create.json"), "--print-object").stdout.lstrip().startswith("{")
    assert json.loads(run(str(path)).stdout)["kind"] == "AdmissionReview"


@pytest.mark.parametrize("text", ["", "# nothing set: the defaults\n", "---\n"])
def test_an_empty_policy_file_is_the_defaults(tmp_path: Path, text: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    assert load_policy(path) == RestorePolicy()
    result = run(str(SAMPLES / "failover-create.json"), "--policy", str(path))
    assert result.returncode == 0, result.stderr


def test_review_refuses_a_cluster_name_the_chart_and_fencing_refuse() -> None:
    result = run(str(SAMPLES / "failover-create.json"), "--cluster", "Member_1")
    assert result.returncode == 2
    assert "--cluster: cluster name 'Member_1' is not a DNS subdomain" in result.stderr
    assert result.stdout == ""


def test_review_refuses_a_file_larger_than_the_server_accepts_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    obj = failover_object()
    obj["metadata"]["annotations"] = {"filler": "x" * (MAX_BODY_BYTES + 10)}
    big.write_text(yaml.safe_dump(obj))
    result = run(str(big), "--diff")
    assert result.returncode == 2
    assert f"larger than {MAX_BODY_BYTES} bytes" in result.stderr and "--max-bytes" in result.stderr
    with big.open("rb") as stdin:
        piped = subprocess.run([*run_args(), "-", "--diff"], stdin=stdin, capture_output=True, text=True)
    assert piped.returncode == 2 and "standard input: larger than" in piped.stderr
    # read when allowed, and then refused as the server refuses it: one request over its limit
    raised = run(str(big), "--diff", "--max-bytes", str(2 * MAX_BODY_BYTES))
    assert raised.returncode == 2 and "the server would refuse it (413)" in raised.stderr


def run_args() -> list[str]:
    from tests.support.server import executable

    return [executable(), "review", "--policy", str(REPO / "webhook" / "restore-policy.yaml")]


def test_the_server_does_not_log_a_storage_librarys_start_up_chatter(member_server: RunningServer) -> None:
    """gcsfs announced "experimental features enabled" at info level on every start: a newcomer reads it
    as the product's."""
    lines = [json.loads(line) for line in member_server.logs().splitlines() if line.startswith("{")]
    assert any(line["msg"] == "restore policy loaded" for line in lines)  # the start-up was logged
    assert [line for line in lines if line["logger"].startswith("gcsfs")] == []


# --- item 4: Events without fencing or session reads -------------------------------------------------------


def test_serve_events_alone_writes_the_restore_decision_as_an_event(cert_dir: Path, tmp_path: Path) -> None:
    """``serve --role member --events`` (the chart's default): the account may create Events and nothing
    else, and the server writes them; before, a member without --cluster or session reads wrote none."""
    api = fakeapi.start(fakeapi.events_collection())  # events only: no Flink objects are readable here
    try:
        kubeconfig = api.kubeconfig(tmp_path / "member.kubeconfig")
        policy = REPO / "webhook" / "restore-policy.yaml"
        with serve(
            cert_dir, policy, tmp_path / "server.log", extra=["--events"], env={"KUBECONFIG": str(kubeconfig)}
        ) as server:
            answer = server.client().admit(json.loads((SAMPLES / "failover-create.json").read_text()))
            assert answer["response"]["allowed"] is True and answer["response"].get("patch")
            assert wait_for(lambda: [e["reason"] for e in api.events] == ["Restored"]), api.events
        (event,) = api.events
        assert event["reportingController"] == "flink-failover.io/member"
        assert "chk-8" in event["note"]
    finally:
        api.stop()


def test_status_whose_records_cannot_be_read_exits_1_and_still_shows_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job is listed (its state comes from the object); its ownership records are in a storage that
    refuses every connection: said on stderr, exit 1."""
    from tests.support.objects import running_deployment

    running = fakeapi.start_member_cluster()
    try:
        running.fake.upsert(running_deployment(checkpoint_dir="s3://flink-state/checkpoints"))
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
            policy = tmp_path / "policy.yaml"
            policy.write_text(
                yaml.safe_dump(
                    {
                        "storageOptions": {"s3": {"endpoint_url": endpoint, "anon": True}},
                        "fencing": {
                            "leaseSeconds": 6,
                            "pollSeconds": 1,
                            "renewDeadlineSeconds": 2,
                            "stopMarginSeconds": 1,
                        },
                    }
                )
            )
            kubeconfig = running.kubeconfig(tmp_path / "member.kubeconfig")
            code = main(["status", "--kubeconfig", str(kubeconfig), "--policy", str(policy)])
        out, err = capsys.readouterr()
        assert code == 1
        assert "FlinkDeployment analytics/orders: running" in out
        assert "flink-failover status: FlinkDeployment analytics/orders: records unreadable: storage:" in err
    finally:
        running.stop()
