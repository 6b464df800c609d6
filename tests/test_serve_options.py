"""``serve`` refuses an option the chosen role does not read, naming the option that does, instead of
accepting and ignoring it (``--role estimator --bind`` used to start on ``--server-port`` unannounced)."""

from __future__ import annotations

import argparse

import pytest

from webhook import roles
from webhook.cli import build_parser, main
from webhook.common.kubeclient import ClientConfig
from webhook.member import options as member_options


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["serve", *argv]) == 2
    return capsys.readouterr().err


def test_estimator_refuses_the_webhook_options_and_names_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(
        capsys, "--role", "estimator", "--cluster", "c", "--kubeconfig", "/nonexistent", "--bind", "0.0.0.0:1"
    )
    assert "--role estimator does not use --bind" in err and "--server-port" in err
    assert "--metrics-bind" in err and "credentials" not in err  # refused before anything is tried
    err = refused(capsys, "--role", "estimator", "--cert-dir", "certs", "--threads", "4", "--policy", "p")
    assert "--grpc-auth-cert-file" in err and "--grpc-workers" in err and "no restore policy" in err


def test_member_refuses_the_other_roles_options(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, "--role", "member", "--server-port", "10352", "--no-capture")
    assert "--role member does not use --server-port: the webhook listens on --bind" in err
    assert "--role member does not use --no-capture: it is an option of the control-plane role" in err


def test_member_refuses_a_cluster_name_karmada_would_not_have(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLINK_FAILOVER_CLUSTER", raising=False)
    err = refused(capsys, "--role", "member", "--cluster", "Member_1")
    assert "--cluster: cluster name 'Member_1' is not a DNS subdomain" in err


def test_control_plane_refuses_the_other_roles_options(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(
        capsys,
        "--role",
        "control-plane",
        "--require-storage-backends",
        "--metrics-bind",
        ":1",
        "--cluster-name",
        "x",
    )
    assert "--require-storage-backends: it is an option of the member role" in err
    assert "--metrics-bind: /metrics is served on --bind" in err
    assert "--cluster-name: it is an option of the member and estimator roles" in err  # as spelled


def test_defaults_and_environment_are_not_given_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLINK_FAILOVER_BIND", "0.0.0.0:9443")
    args = build_parser().parse_args(["serve", "--role", "estimator", "--cluster", "c"])
    assert roles.refused_options(roles.SERVED["estimator"], getattr(args, roles.GIVEN, {})) == []


def serve_options() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = sub.choices["serve"]
    return {a.dest for a in serve._actions if a.option_strings and a.dest != "help"}


def test_every_serve_option_is_read_by_some_role_and_every_role_reads_only_options() -> None:
    """An option no role reads would be accepted and ignored for every role."""
    options = serve_options()
    read = set(roles.EVERY_ROLE).union(*(role.options for role in roles.SERVED.values()))
    assert options == read
    for role in roles.SERVED.values():
        assert set(role.instead) <= options - role.options, role.name


def test_member_with_kubeconfig_and_cluster_gets_a_fencing_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """The member role's options: --cluster runs the fencing agent (on --kubeconfig, else in-cluster),
    --kubeconfig alone reads only session clusters, neither is the webhook alone; a policy with fencing
    off never fences."""
    from webhook.policy.restore import FencingPolicy, RestorePolicy

    monkeypatch.delenv("FLINK_FAILOVER_CLUSTER", raising=False)  # --cluster's default

    parse = build_parser().parse_args
    args = parse(["serve", "--kubeconfig", "/k", "--context", "ctx", "--cluster", "member1"])
    options = member_options.from_args(args, RestorePolicy())
    assert isinstance(options, member_options.MemberOptions) and options.fencing is not None
    assert (options.fencing.client.kubeconfig, options.fencing.client.context) == ("/k", "ctx")
    assert options.fencing.cluster == "member1"
    assert options.own_cluster == options.fencing.client
    in_cluster = member_options.from_args(parse(["serve", "--cluster", "member1"]), RestorePolicy())
    assert isinstance(in_cluster, member_options.MemberOptions) and in_cluster.fencing is not None
    assert in_cluster.fencing.client.kubeconfig is None
    sessions = member_options.from_args(parse(["serve", "--kubeconfig", "/k"]), RestorePolicy())
    assert isinstance(sessions, member_options.MemberOptions) and sessions.fencing is None
    assert sessions.own_cluster is not None and sessions.own_cluster.kubeconfig == "/k"
    off = RestorePolicy(fencing=FencingPolicy(enabled=False))
    unfenced = member_options.from_args(parse(["serve", "--cluster", "member1"]), off)
    assert isinstance(unfenced, member_options.MemberOptions) and unfenced.fencing is None
    alone = member_options.from_args(parse(["serve", "--require-storage-backends"]), RestorePolicy())
    assert (
        isinstance(alone, member_options.MemberOptions)
        and alone.fencing is None
        and alone.require_storage_backends
    )
    assert alone.own_cluster is None
    # issue 24: session clusters read in-cluster without fencing (the chart's member.readSessionClusters)
    reads = member_options.from_args(parse(["serve", "--read-session-clusters"]), RestorePolicy())
    assert isinstance(reads, member_options.MemberOptions) and reads.fencing is None
    assert reads.own_cluster == ClientConfig()


def test_the_agent_users_come_from_the_environment_and_the_options_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``$FLINK_FAILOVER_AGENT_USERS`` (comma-separated, the chart's) through ``add_env_option``, each
    ``--agent-user`` added to it; ``$FLINK_FAILOVER_CLUSTER`` is ``--cluster``'s default."""
    from webhook.policy.restore import RestorePolicy

    monkeypatch.setenv("FLINK_FAILOVER_AGENT_USERS", "system:serviceaccount:ff:agent, ops")
    monkeypatch.setenv("FLINK_FAILOVER_CLUSTER", "member2")
    args = build_parser().parse_args(["serve", "--kubeconfig", "/k", "--agent-user", "alice"])
    options = member_options.from_args(args, RestorePolicy())
    assert isinstance(options, member_options.MemberOptions)
    assert options.agent_users == frozenset({"system:serviceaccount:ff:agent", "ops", "alice"})
    assert options.fencing is not None and options.fencing.cluster == "member2"
    assert roles.refused_options(roles.SERVED["member"], getattr(args, roles.GIVEN, {})) == []


def test_fencing_refuses_to_start_under_a_webhook_registered_ignore(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: with fencing a held job stays held only while the webhook answers; a registration with
    ``failurePolicy: Ignore`` lets every held object through while it is down. The chart tells the server
    its registration's policy ($FLINK_FAILOVER_WEBHOOK_FAILURE_POLICY); with --cluster and the policy's
    fencing on, Ignore is refused at start with one line saying what to set."""
    monkeypatch.delenv("FLINK_FAILOVER_CLUSTER", raising=False)
    monkeypatch.delenv(member_options.FAILURE_POLICY_ENV, raising=False)
    err = refused(capsys, "--cluster", "member1", "--webhook-failure-policy", "Ignore")
    (line,) = [line for line in err.splitlines() if line.startswith("flink-failover:")]
    assert "--webhook-failure-policy Ignore with fencing (--cluster member1" in line
    assert "member.webhook.failurePolicy: Fail" in line and "let through" in line
    monkeypatch.setenv(member_options.FAILURE_POLICY_ENV, "Ignore")  # what the chart sets
    assert "--webhook-failure-policy Ignore with fencing" in refused(capsys, "--cluster", "member1")
    monkeypatch.setenv(member_options.FAILURE_POLICY_ENV, "ignore")  # argparse checks only what is given
    assert "FLINK_FAILOVER_WEBHOOK_FAILURE_POLICY: 'ignore' is not one of Fail, Ignore" in refused(
        capsys, "--cluster", "member1"
    )


def test_ignore_is_accepted_without_fencing_and_fail_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from webhook.policy.restore import FencingPolicy, RestorePolicy

    monkeypatch.delenv("FLINK_FAILOVER_CLUSTER", raising=False)
    monkeypatch.delenv(member_options.FAILURE_POLICY_ENV, raising=False)
    parse = build_parser().parse_args
    assert parse(["serve"]).webhook_failure_policy == "Fail"  # the default, as the chart's
    alone = member_options.from_args(parse(["serve", "--webhook-failure-policy", "Ignore"]), RestorePolicy())
    assert isinstance(alone, member_options.MemberOptions) and alone.fencing is None
    off = RestorePolicy(fencing=FencingPolicy(enabled=False))
    args = parse(["serve", "--cluster", "member1", "--webhook-failure-policy", "Ignore"])
    unfenced = member_options.from_args(args, off)
    assert isinstance(unfenced, member_options.MemberOptions) and unfenced.fencing is None
    fenced = member_options.from_args(
        parse(["serve", "--cluster", "member1", "--webhook-failure-policy", "Fail"]), RestorePolicy()
    )
    assert isinstance(fenced, member_options.MemberOptions) and fenced.fencing is not None
    monkeypatch.setenv(member_options.FAILURE_POLICY_ENV, "Fail")
    args = parse(["serve", "--cluster", "member1"])
    assert isinstance(member_options.from_args(args, RestorePolicy()), member_options.MemberOptions)
    assert roles.refused_options(roles.SERVED["member"], getattr(args, roles.GIVEN, {})) == []
    given = parse(["serve", "--role", "control-plane", "--webhook-failure-policy", "Fail"])
    assert roles.refused_options(roles.SERVED["control-plane"], getattr(given, roles.GIVEN, {})) == [
        "--role control-plane does not use --webhook-failure-policy: it is an option of the member role"
    ]


def test_native_sidecars_are_read_from_the_version_unless_declared(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--native-sidecars`` (the chart's member.keeper.nativeSidecars, as the variable): auto by default;
    a value the variable gives that is none of auto/on/off stops the server with the variable named."""
    from webhook.member.keeper import Sidecars
    from webhook.policy.restore import RestorePolicy

    monkeypatch.delenv("FLINK_FAILOVER_CLUSTER", raising=False)
    monkeypatch.delenv(member_options.NATIVE_SIDECARS_ENV, raising=False)
    parse = build_parser().parse_args
    default = member_options.from_args(parse(["serve", "--cluster", "member1"]), RestorePolicy())
    assert isinstance(default, member_options.MemberOptions) and default.native_sidecars is Sidecars.AUTO
    given = member_options.from_args(
        parse(["serve", "--cluster", "member1", "--native-sidecars", "on"]), RestorePolicy()
    )
    assert isinstance(given, member_options.MemberOptions) and given.native_sidecars is Sidecars.ON
    monkeypatch.setenv(member_options.NATIVE_SIDECARS_ENV, "off")  # read when the parser is built
    args = build_parser().parse_args(["serve", "--cluster", "member1"])
    chart = member_options.from_args(args, RestorePolicy())
    assert isinstance(chart, member_options.MemberOptions) and chart.native_sidecars is Sidecars.OFF
    assert roles.refused_options(roles.SERVED["member"], getattr(args, roles.GIVEN, {})) == []
    monkeypatch.setenv(member_options.NATIVE_SIDECARS_ENV, "yes")
    assert "FLINK_FAILOVER_NATIVE_SIDECARS: 'yes' is not one of auto, on, off" in refused(
        capsys, "--cluster", "member1"
    )
