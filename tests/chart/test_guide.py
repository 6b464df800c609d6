"""docs/guide-flink-on-karmada.md as the script tests/support/guide.py reads: every step marked, every
``render`` step rendered and validated here (helm with the same values and flags against the chart's
schema and Kubernetes', the image build as make would run it, each rollout naming a Deployment the
release renders), every ``run`` step checked for what the end-to-end tier needs (its helm releases run no
pods, every cluster named by a guide variable, every variable defined, its files real), and every
manifest and values file it names validated (Flink and Karmada objects against the CRDs in ../shared/data,
the guide's FlinkDeployment converted as Karmada converts it). The run steps themselves are executed in
order by the end-to-end tier against a real Karmada."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.chart.test_chart import run_helm
from tests.chart.validate import kubernetes_version
from tests.chart.validate import validate as validate_rendered
from tests.conftest import REPO
from tests.controlplane.test_policies import check_cluster_taint_policy_shape
from tests.support import guide
from tests.support.crds import crd_validator
from tests.support.karmada_lua import karmada_lua
from tests.support.karmada_results import convert
from webhook.policy.load import load_policy
from webhook.policy.restore import policy_from_dict

GUIDE = REPO / "docs" / "guide-flink-on-karmada.md"
STEPS = guide.steps(GUIDE)
FILES = re.compile(r"\b((?:docs/guide|policies/karmada|charts/flink-failover)/[\w./-]+\.ya?ml)\b")
PATHS = re.compile(r"(?<![\w/.$-])((?:docs|policies|charts|tests|webhook)/[\w./-]*[\w/])")
CRDS = {
    "FlinkDeployment": ("flink/flinkdeployments.flink.apache.org-v1.yml", "v1beta1"),
    "FlinkSessionJob": ("flink/flinksessionjobs.flink.apache.org-v1.yml", "v1beta1"),
    "PropagationPolicy": ("karmada/policy.karmada.io_propagationpolicies.yaml", "v1alpha1"),
    "ResourceInterpreterCustomization": (
        "karmada/config.karmada.io_resourceinterpretercustomizations.yaml",
        "v1alpha1",
    ),
}
# Kubernetes' own kinds, validated by kubernetes-validate
BUILT_IN = {"MutatingWebhookConfiguration", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"}
# Set by the user or the tier, not by the guide: storage credentials and optional address overrides.
EXTERNAL = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "HOME", "PWD"}
EXTERNAL |= {"MEMBER1_API_URL", "MEMBER2_API_URL"}
# helm flags that name where a release goes, not what it renders
PLACE_FLAGS = {"--kubeconfig", "--kube-context", "--timeout"}
PLACE_SWITCHES = {"--create-namespace", "--wait", "--atomic"}


# --- the guide is a script ----------------------------------------------------------------------------------


def test_every_shell_block_of_every_guide_is_a_marked_step() -> None:
    found = guide.all_steps()  # raises GuideError on an unmarked block, an unknown kind or need
    assert {s.source for s in found} == set(guide.GUIDES)
    assert STEPS[0].prelude and [s for s in STEPS if s.prelude] == [STEPS[0]]
    assert guide.runnable(STEPS) and guide.render_only(STEPS)
    assert [s.index for s in STEPS] == list(range(1, len(STEPS) + 1))
    for step in STEPS:
        assert step.commands, step.where()
        checked = subprocess.run(["bash", "-n"], input=step.text, text=True, capture_output=True, check=False)
        assert checked.returncode == 0, f"{step.where()}: {checked.stderr}"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("```sh\nkubectl get pods\n```\n", "without a <!-- step"),
        ("<!-- step: maybe -->\n```sh\nls\n```\n", "step kind must be one of"),
        ("<!-- step: run; needs: a-kubelet -->\n```sh\nls\n```\n", "unknown needs ['a-kubelet']"),
        ("<!-- step: run -->\n```yaml\na: 1\n```\n", "only sh runs"),
        ("<!-- step: render; prelude -->\n```sh\nls\n```\n", "a prelude runs"),
        ("<!-- step: run -->\n\nsome prose\n```sh\nls\n```\n", "not followed by its ```sh block"),
        ("<!-- step: run; later -->\n```sh\nls\n```\n", "unknown step attribute"),
    ],
)
def test_a_guide_that_is_not_a_script_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "guide-x.md"
    path.write_text("# x\n\n" + text)
    with pytest.raises(guide.GuideError, match=re.escape(problem)):
        guide.steps(path)


def test_the_parser_reads_steps_kinds_needs_and_commands(tmp_path: Path) -> None:
    path = tmp_path / "guide-y.md"
    path.write_text(
        "# Title\n\n<!-- step: run; prelude -->\n```sh\nexport A=1  # a comment\n```\n\n## Two\n\n"
        "text\n\n```yaml\nnot: a step\n```\n\n<!-- step: run; needs: members, storage -->\n```sh\n"
        'kubectl --kubeconfig "$A" get x \\\n  -o yaml | flink-failover review -\n'
        "cat > f <<EOF\nbody: 1\nEOF\n```\n"
        "\n<!-- step: render -->\n```sh\nmake image\n```\n"
    )
    first, second, third = guide.steps(path)
    assert (first.mode, first.prelude, first.commands) == (guide.Mode.RUN, True, ["export A=1"])
    assert (second.section, second.needs, second.index, second.line) == ("Two", ("members", "storage"), 2, 17)
    assert second.commands == [
        'kubectl --kubeconfig "$A" get x -o yaml | flink-failover review -',
        "cat > f <<EOF",
    ]
    assert second.heredocs() == ["body: 1\n"]
    assert third.mode is guide.Mode.RENDER and guide.render_only([first, second, third]) == [third]
    assert guide.prelude([first, second, third]) == "export A=1  # a comment\n"


# --- the prelude: variables and functions every step uses ---------------------------------------------------


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory, helm: str) -> dict[str, str]:
    """The variables the prelude defines, run by bash with its defaults (HOME and the work dir a temp)."""
    home = tmp_path_factory.mktemp("home")
    env = {"PATH": f"{Path(helm).parent}:{os.environ['PATH']}", "HOME": str(home)}
    result = subprocess.run(
        ["bash", "-ec", guide.prelude(STEPS) + "env -0"], env=env, cwd=home, capture_output=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return dict(item.split("=", 1) for item in result.stdout.decode().split("\0") if "=" in item)


def test_the_prelude_defines_each_cluster_and_where_files_go(environment: dict[str, str]) -> None:
    for name in ("KARMADA", "HOST", "MEMBER1", "MEMBER2"):
        assert environment[f"{name}_KUBECONFIG"].startswith(environment["HOME"])
    assert Path(environment["GUIDE_DIR"]).is_dir()
    assert environment["IMAGE_REPOSITORY"] and environment["WORK_WEBHOOK_URL"].endswith("/mutate-work")


def test_the_prelude_functions_name_each_members_kubeconfig_and_address(helm: str, tmp_path: Path) -> None:
    """Run for real (bash and kubectl, offline: ``config view`` reads only the file)."""
    from tests.support.kube import write_kubeconfig

    member1 = write_kubeconfig(tmp_path / "m1.yaml", "https://member1.example.com:6443")
    env = {"PATH": f"{Path(helm).parent}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    env |= {
        "MEMBER1_KUBECONFIG": str(member1),
        "MEMBER2_KUBECONFIG": "/m2",
        "MEMBER2_API_URL": "https://10.0.0.2",
    }
    script = guide.prelude(STEPS) + (
        "kubeconfig_of member1; kubeconfig_of member2; api_url_of member1; api_url_of member2\n"
        "kubeconfig_of member3 || echo refused\n"
    )
    done = subprocess.run(["bash", "-ec", script], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        str(member1),
        "/m2",
        "https://member1.example.com:6443",
        "https://10.0.0.2",
        "refused",
    ]
    assert "no member cluster named 'member3'" in done.stderr


def _uses(text: str) -> set[str]:
    return set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", text))


def test_every_variable_a_step_uses_is_defined_before() -> None:
    defined = set(EXTERNAL)
    for step in STEPS:
        defined |= set(re.findall(r"(?:^|[\s;(])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=", step.text, re.M))
        defined |= set(re.findall(r"\bfor\s+(\w+)\s+in\b", step.text))
        used = {u for u in _uses(step.text) if not u.isdigit()}
        assert used <= defined, f"{step.where()}: {sorted(used - defined)} used before any step sets them"


def _cluster_segments(command: str) -> Iterator[str]:
    """Each kubectl / helm / fencing command inside ``command`` (also inside ``$(...)`` and pipes)."""
    flat = re.sub(r'"\$\(kubeconfig_of "\$\w+"\)"', "KUBECONFIG_OF", command)
    for segment in re.split(r"\$\(|\||;|&&|\bdo\b|\bthen\b", flat):
        words = segment.strip().split()
        if words[:1] in (["kubectl"], ["helm"]) or words[:2] in (
            ["flink-failover", "status"],
            ["flink-failover", "release"],
        ):
            yield segment.strip()


def test_every_command_names_its_cluster_by_a_guide_variable() -> None:
    """The convention the guide states: ``--kubeconfig "$<CLUSTER>_KUBECONFIG"``, or a member's by
    ``kubeconfig_of``; never a current context that differs from machine to machine."""
    prelude = guide.prelude(STEPS)
    variables = set(re.findall(r"export (\w+_KUBECONFIG)=", prelude))
    assert variables == {"KARMADA_KUBECONFIG", "HOST_KUBECONFIG", "MEMBER1_KUBECONFIG", "MEMBER2_KUBECONFIG"}
    seen = 0
    for step in STEPS:
        for command in step.commands:
            for segment in _cluster_segments(command):
                seen += 1
                named = re.search(r'--kubeconfig (?:"\$(\w+)"|(KUBECONFIG_OF))', segment)
                assert named, f"{step.where()}: {segment!r} names no cluster"
                assert named.group(2) or named.group(1) in variables, f"{step.where()}: {segment!r}"
                assert "--context" not in segment and "--kube-context" not in segment
    assert seen > 30


def test_the_guide_names_only_files_that_exist_and_every_guide_file() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    named = set(PATHS.findall(text))
    assert named, "the guide names its files"
    assert sorted(n for n in named if not (REPO / n).exists()) == []
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert sorted(link for link in links if not (GUIDE.parent / link).exists()) == []
    own = {str(p.relative_to(REPO)) for p in (REPO / "docs" / "guide").iterdir()}
    assert own <= named, f"files under docs/guide the guide does not name: {own - named}"
    for step in STEPS:
        for words in step.words():
            for i, word in enumerate(words):
                if words[i - 1 : i] == ["-f"] and not word.startswith("$") and word != "-":
                    assert (REPO / word).is_file(), f"{step.where()}: {word}"


# --- render steps: rendered and validated here --------------------------------------------------------------


def _expand(word: str, env: dict[str, str], where: str) -> str:
    assert "$(" not in word, f"{where}: a render step cannot be rendered with a command substitution: {word}"

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in env, f"{where}: ${name} is not set by the prelude"
        return env[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, word)


def _helm_template(
    helm: str, words: list[str], env: dict[str, str], where: str
) -> tuple[str, str, list[dict[str, Any]]]:
    """``helm install NAME CHART ARGS`` rendered as ``helm template`` with the same values and flags:
    (its cluster's kubeconfig variable, its namespace, the objects)."""
    assert words[:2] == ["helm", "install"], f"{where}: {words}"
    args, cluster, namespace = [], "", "default"
    rest = iter(words[2:])
    for word in rest:
        if word in PLACE_SWITCHES:
            continue
        if word in PLACE_FLAGS:
            given = next(rest)
            cluster = given if word == "--kubeconfig" else cluster
            continue
        args.append(_expand(word, env, where))
        if word in ("-n", "--namespace"):
            namespace = _expand(next(rest), env, where)
            args.append(namespace)
    result = run_helm(helm, "template", *args)
    assert result.returncode == 0, f"{where}: {' '.join(words)}\n{result.stderr}"
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert docs, where
    for doc in docs:
        validate_rendered(doc)
    return cluster, namespace, docs


def _make_dry_run(words: list[str], env: dict[str, str], where: str) -> None:
    target, *assignments = words[1:]
    image = next(_expand(a, env, where).split("=", 1)[1] for a in assignments if a.startswith("IMAGE="))
    done = subprocess.run(
        ["make", "-s", "-n", target, "OCI_BUILDER=docker", f"IMAGE={image}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{where}: {done.stderr}"
    version = yaml.safe_load((REPO / "charts" / "flink-failover" / "Chart.yaml").read_text())["appVersion"]
    expected = {
        "image": ["docker", "build", "-f", "Dockerfile", "-t", f"{image}:{version}", "."],
        "image-push": ["docker", "push", f"{image}:{version}"],
    }
    assert done.stdout.split() == expected[target], where


@pytest.mark.parametrize("step", guide.render_only(STEPS), ids=lambda s: s.where())
def test_every_render_step_renders_and_validates(
    helm: str, environment: dict[str, str], step: guide.Step
) -> None:
    rendered: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for words in step.words():
        where = f"{step.where()}: {' '.join(words)}"
        if words[:2] == ["helm", "install"]:
            cluster, namespace, docs = _helm_template(helm, words, environment, where)
            assert {d["kind"] for d in docs} & POD_KINDS, f"{where}: runs no pods: make it a run step"
            rendered.setdefault((cluster, namespace), []).extend(docs)
        elif words[:1] == ["make"] and words[1] in ("image", "image-push"):
            _make_dry_run(words, environment, where)
        elif words[:1] == ["kubectl"] and "rollout" in words:
            kind, _, name = words[words.index("status") + 1].partition("/")
            cluster = words[words.index("--kubeconfig") + 1]
            namespace = words[words.index("-n") + 1]
            names = {
                d["metadata"]["name"]
                for d in rendered.get((cluster, namespace), [])
                if d["kind"] == "Deployment"
            }
            assert kind == "deployment" and name in names, f"{where}: the releases above render {names}"
        else:
            pytest.fail(
                f"{where}: no way to validate this command here: make it a run step, or teach this test"
            )


@pytest.mark.parametrize(
    "step",
    [s for s in guide.runnable(STEPS) if any(w[:2] == ["helm", "install"] for w in s.words())],
    ids=lambda s: s.where(),
)
def test_a_release_the_tier_installs_runs_no_pods(
    helm: str, environment: dict[str, str], step: guide.Step
) -> None:
    """A loopback Karmada has no kubelet: a ``run`` step's helm release must be one of objects only."""
    for words in step.words():
        if words[:2] == ["helm", "install"]:
            _, _, docs = _helm_template(helm, words, environment, step.where())
            assert not {d["kind"] for d in docs} & POD_KINDS, step.where()


def test_the_kubeconfigs_the_guide_writes_read_their_token_from_a_file_beside_them() -> None:
    """What the chart mounts whole, so a renewed token is read without a restart."""
    bodies = [body for step in STEPS for body in step.heredocs()]
    assert len(bodies) == 2
    for body in bodies:
        filled = re.sub(r"\$\((?:[^()]|\([^()]*\))*\)", "https://filled.example", body)
        config = yaml.safe_load(re.sub(r"\$\{?\w+\}?", "filled", filled))
        assert config["kind"] == "Config" and config["current-context"]
        (user,) = config["users"]
        assert user["user"] == {"tokenFile": "token"}
        (cluster,) = config["clusters"]
        assert set(cluster["cluster"]) == {"server", "certificate-authority-data"}


# --- the files it applies -----------------------------------------------------------------------------------


def named_files() -> list[str]:
    return sorted(set(FILES.findall(GUIDE.read_text(encoding="utf-8"))))


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name in named_files():
        base = Path(name).name
        if base.startswith("values") or base == "restore-policy.yaml" or name.startswith("charts/"):
            continue
        for doc in yaml.safe_load_all((REPO / name).read_text(encoding="utf-8")):
            if doc:
                out.append((name, doc))
    return out


@pytest.mark.shared
@pytest.mark.parametrize(("name", "doc"), _manifests(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_manifest_of_the_guide_validates(shared_data: Path, name: str, doc: dict[str, Any]) -> None:
    kind = doc["kind"]
    if kind in CRDS:
        crd, version = CRDS[kind]
        errors = [
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in crd_validator(shared_data / "crds" / crd, version).iter_errors(doc)
        ]
        assert errors == [], name
    elif kind in BUILT_IN:
        kubernetes_validate.validate(doc, kubernetes_version(), strict=True)
    elif kind == "ClusterTaintPolicy":
        check_cluster_taint_policy_shape(doc)
    else:
        pytest.fail(f"{name}: no schema for {kind}")


def test_the_guides_policy_file_is_the_member_releases_policy() -> None:
    values = yaml.safe_load((REPO / "docs" / "guide" / "values-member.yaml").read_text())
    assert load_policy(REPO / "docs" / "guide" / "restore-policy.yaml") == policy_from_dict(values["policy"])


def test_the_estimators_member_account_reads_what_the_in_cluster_estimator_may(
    helm: str, tmp_path: Path
) -> None:
    from tests.chart.test_chart import find, render

    docs = render(helm, tmp_path, {"role": "estimator", "estimator": {"cluster": "member1"}})
    (chart_role,) = find(docs, "ClusterRole")
    guide_roles = [d for _, d in _manifests() if d["kind"] == "ClusterRole"]
    assert [r["rules"] for r in guide_roles] == [chart_role["rules"]]
    account = next(d for _, d in _manifests() if d["kind"] == "ServiceAccount")
    commands = " ".join(c for s in STEPS for c in s.commands)
    assert f"-n {account['metadata']['namespace']} create token {account['metadata']['name']}" in commands


def test_the_guides_flink_deployment_gets_its_components_as_karmada_converts_them() -> None:
    (obj,) = [doc for name, doc in _manifests() if doc["kind"] == "FlinkDeployment"]
    customization = yaml.safe_load(
        (REPO / "policies/karmada/resourceinterpretercustomization-flink-components.yaml").read_text()
    )
    sandbox = karmada_lua()
    sandbox.load(customization["spec"]["customizations"]["componentResource"]["luaScript"])
    jm, tm = convert(sandbox, "componentResource", obj)
    assert (jm["name"], jm["replicas"], tm["name"], tm["replicas"]) == ("jobmanager", 1, "taskmanager", 2)
    assert tm["replicaRequirements"]["resourceRequest"] == {"cpu": "2000m", "memory": "4Gi"}
    for comp in (jm, tm):
        claim = comp["replicaRequirements"]["nodeClaim"]
        assert claim["nodeSelector"] == {"pool": "flink"}
        assert claim["tolerations"][0]["key"] == "dedicated"


def test_the_failover_step_waits_longer_than_the_graceful_eviction_timeout() -> None:
    """The guide's wait for the restored job on the other member outlasts Karmada's 10-minute
    graceful-eviction timeout (purge mode Directly, a cluster that stays down), which it explains."""
    text = GUIDE.read_text(encoding="utf-8")
    assert "--graceful-eviction-timeout" in text and "10 minutes by default" in text
    (failover,) = [s for s in STEPS if "cluster-down" in s.needs]
    waits = [c for c in failover.commands if "--for=create flinkdeployment/orders" in c]
    (timeout,) = [shlex.split(w)[-1] for w in waits]
    assert timeout.startswith("--timeout=") and int(timeout.removeprefix("--timeout=").rstrip("m")) > 10


# --- issue 30 item 1: what a new user met, step by step -----------------------------------------------------

ALWAYS_THERE = {"default", "kube-system", "karmada-system"}  # created by Kubernetes or by Karmada itself


def _walk() -> Iterator[tuple[guide.Step, list[str], set[str], set[str]]]:
    """Every command in order, with the namespaces and Secrets the run steps created before it
    (``kubectl ... create namespace|secret generic NAME``; a loop over the members counts for each)."""
    namespaces, secrets = set(ALWAYS_THERE), set()
    for step in STEPS:
        for words in step.words():
            yield step, words, set(namespaces), set(secrets)
            if step.mode is not guide.Mode.RUN or "create" not in words:
                continue
            what = words[words.index("create") + 1 :]
            name = (
                what[1] if what[:1] == ["namespace"] else what[2] if what[:2] == ["secret", "generic"] else ""
            )
            names = {name.replace("$member", m) for m in ("member1", "member2")}
            (namespaces if what[:1] == ["namespace"] else secrets).update(names - {""})


def test_every_namespace_exists_before_a_step_puts_something_in_it() -> None:
    """Before: step 2 applied the PropagationPolicy into analytics, which step 6 created."""
    for step, words, namespaces, _ in _walk():
        for i, word in enumerate(words):
            if words[i - 1 : i] == ["-f"] and word.endswith(".yaml"):
                for doc in yaml.safe_load_all((REPO / word).read_text()):
                    ns = (doc or {}).get("metadata", {}).get("namespace")
                    assert ns is None or ns in namespaces, (
                        f"{step.where()}: {word} goes into {ns}, not created yet"
                    )
            if word in ("-n", "--namespace") and words[0] in ("kubectl", "helm"):
                assert words[i + 1] in namespaces, f"{step.where()}: {' '.join(words)}"


def test_every_secret_a_release_reads_is_created_before_it(helm: str, environment: dict[str, str]) -> None:
    """Before: the control plane read flink-failover-karmada, which only docs/install.md created; the
    estimator's member1-kubeconfig came from nowhere; no storage credentials at all."""
    read_somewhere: set[str] = set()
    for step, words, _, secrets in _walk():
        if step.mode is not guide.Mode.RENDER or words[:2] != ["helm", "install"]:
            continue
        _, _, docs = _helm_template(helm, words, environment, step.where())
        made = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
        made |= {f"{d['metadata']['name']}-tls" for d in docs if d["kind"] == "Service"}  # certgen's
        for doc in docs:
            if doc["kind"] != "Deployment":
                continue
            pod = doc["spec"]["template"]["spec"]
            read = {v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}
            read |= {
                e["valueFrom"]["secretKeyRef"]["name"]
                for c in pod["containers"]
                for e in c.get("env", [])
                if "secretKeyRef" in e.get("valueFrom", {})
            }
            assert read - made <= secrets, (
                f"{step.where()}: {' '.join(words)} reads {sorted(read - made - secrets)}"
            )
            read_somewhere |= read - made
    assert {
        "flink-failover-karmada",
        "flink-failover-storage",
        "member1-kubeconfig",
        "member2-kubeconfig",
    } <= read_somewhere


def test_the_image_is_built_and_pushed_before_a_release_runs_it(
    helm: str, environment: dict[str, str]
) -> None:
    """Before: no step built or pushed the image, and the chart's default was not published."""
    build = next(s for s in STEPS if any(w[:2] == ["make", "image-push"] for w in s.words()))
    for step in guide.render_only(STEPS):
        for words in step.words():
            if words[:2] == ["helm", "install"]:
                assert step.index > build.index, step.where()
                assert "image.repository=$IMAGE_REPOSITORY" in words, step.where()


def test_the_guide_checks_before_it_fails_over() -> None:
    """Before: no step said how to see what a failover would do, or what fencing makes of a job."""
    (failover,) = [s for s in STEPS if "cluster-down" in s.needs]
    before = " ".join(c for s in STEPS if s.index < failover.index for c in s.commands)
    assert "flink-failover review - --as-failover --diff --policy docs/guide/restore-policy.yaml" in before
    assert "flink-failover status analytics/orders" in before
    assert "flink-failover status --held" in " ".join(failover.commands)


def test_the_guide_warns_that_karmadas_estimator_and_this_one_cannot_share_a_cluster() -> None:
    text = " ".join(GUIDE.read_text(encoding="utf-8").split())
    assert "Karmada's own scheduler-estimator and this one must not both serve a cluster" in text
    listing = next(
        s
        for s in STEPS
        if any("karmada-scheduler-estimator-member1" in c and " get " in c for c in s.commands)
    )
    install = next(
        s for s in STEPS if any(w[:3] == ["helm", "install", "estimator-member1"] for w in s.words())
    )
    assert listing.mode is guide.Mode.RUN and listing.index < install.index
