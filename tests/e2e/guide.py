"""docs/guide-flink-on-karmada.md run as written against the tier's real Karmada (``tests/support/guide.py``).

Every ``run`` step is executed in order by bash, from the repository root, after the guide's prelude, with
the variables the guide names set to the tier's kubeconfigs and addresses; each ``render`` step's
``helm install`` is carried out as the tier installs a release (``tests/e2e/install.py``: rendered with the
same name, namespace, values files and ``--set``s, its pods run as processes), its ``kubectl rollout
status`` waits for those processes to be ready, and the image build is left to the unit tier (it needs a
registry). The one setting the tier adds is the one the guide tells MinIO users to add: the member
releases' ``policy.storageOptions.s3.endpoint_url``, here moto's. What a step ``needs`` is there by then:
the releases the render steps installed, the operator doubles, the storage; ``cluster-down`` cuts Karmada's
way to the cluster the job runs on while the step runs.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.apiserver import ApiServer
from tests.e2e.balancer import Balancer
from tests.e2e.install import Release, install
from tests.e2e.scenario import World
from tests.e2e.stack import Stack, wait_ready
from tests.support import guide
from tests.support.repo import REPO
from tests.support.s3 import CREDENTIALS

GUIDE = REPO / "docs" / "guide-flink-on-karmada.md"
STEP_TIMEOUT = 1200  # the failover step waits for Karmada's graceful-eviction timeout, as the guide says


class GuideStepFailed(AssertionError):
    pass


@dataclass
class GuideRun:
    path: Path
    outputs: list[tuple[str, str]] = field(default_factory=list)  # (where, what the step printed)
    releases: dict[str, Release] = field(default_factory=dict)

    def output_of(self, section_start: str) -> str:
        return "".join(out for where, out in self.outputs if where.startswith(section_start))


def run_guide(world: World, path: Path = GUIDE) -> GuideRun:
    st = world.stack
    found = guide.steps(path)
    prelude = guide.prelude(found)
    work_webhook = Balancer([])
    folder = st.folder / "guide"
    folder.mkdir(exist_ok=True)
    env = _environment(st, folder, work_webhook)
    run = GuideRun(path)
    for step in found:
        if step.prelude:
            continue
        if step.mode is guide.Mode.RUN:
            _establish(world, step, env)
            run.outputs.append((step.where(), _run(st, step, prelude, env)))
        else:
            _render(st, step, env, run, work_webhook, folder)
    return run


def _environment(st: Stack, folder: Path, work_webhook: Balancer) -> dict[str, str]:
    members = st.karmada.members
    tools = f"{st.tools.kubectl.parent}{os.pathsep}{Path(sys.executable).parent}"
    return {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}",
        "KARMADA_KUBECONFIG": str(st.karmada.kubeconfig),
        "HOST_KUBECONFIG": str(st.karmada.kubeconfig),  # Karmada runs "in" its own API server here
        "MEMBER1_KUBECONFIG": str(members["member1"].kubeconfig),
        "MEMBER2_KUBECONFIG": str(members["member2"].kubeconfig),
        "IMAGE_REPOSITORY": "registry.example/flink-failover",
        "GUIDE_DIR": str(folder),
        "KARMADA_IN_CLUSTER_URL": st.karmada.api.url,
        "WORK_WEBHOOK_URL": f"https://localhost:{work_webhook.port}/mutate-work",
        "AWS_ACCESS_KEY_ID": str(CREDENTIALS["key"]),
        "AWS_SECRET_ACCESS_KEY": str(CREDENTIALS["secret"]),
        "AWS_DEFAULT_REGION": "us-east-1",
        # the commands the guide runs here (review, status) read docs/guide/restore-policy.yaml, which
        # names no endpoint: botocore takes the tier's S3 from the environment
        "AWS_ENDPOINT_URL": st.s3_endpoint,
    }


def _establish(world: World, step: guide.Step, env: dict[str, str]) -> None:
    """What a step needs that only time gives here: ``storage`` means the running job's checkpoints are
    in it (a job that has not checkpointed yet has nothing a failover could restore)."""
    if "storage" not in step.needs:
        return
    runs_on = (Path(env["GUIDE_DIR"]) / "runs-on").read_text().strip()
    key = ("analytics", "orders")
    world.wait_running(key, runs_on, timeout=300)
    world.wait_checkpoints(runs_on, key, 2)


def _run(st: Stack, step: guide.Step, prelude: str, env: dict[str, str]) -> str:
    cut = None
    if "cluster-down" in step.needs:
        runs_on = (Path(env["GUIDE_DIR"]) / "runs-on").read_text().strip()
        cut = st.karmada.members[runs_on].proxy
        cut.cut()
    try:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", prelude + step.text],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
            check=False,
        )
    finally:
        if cut is not None:
            cut.heal()
    if done.returncode != 0:
        raise GuideStepFailed(
            f"guide step {step.where()} ({step.section}) exited {done.returncode}:\n{step.text}\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
    return done.stdout + done.stderr


def _render(
    st: Stack, step: guide.Step, env: dict[str, str], run: GuideRun, work: Balancer, folder: Path
) -> None:
    for words in step.words():
        words = [os.path.expandvars(_with(w, env)) for w in words]
        if words[:2] == ["helm", "install"]:
            release = _helm_install(st, words, env, work, folder)
            run.releases[release.name + "@" + release.api.name] = release
        elif words[:1] == ["make"]:
            continue  # the image: built and pushed by make image, checked by the unit tier
        elif words[:1] == ["kubectl"] and "rollout" in words and "status" in words:
            for release in run.releases.values():
                wait_ready(release)
        else:
            raise GuideStepFailed(
                f"guide step {step.where()}: the tier cannot stand in for {' '.join(words)!r}"
            )


def _with(word: str, env: dict[str, str]) -> str:
    for key in ("KARMADA_KUBECONFIG", "HOST_KUBECONFIG", "MEMBER1_KUBECONFIG", "MEMBER2_KUBECONFIG",
                "IMAGE_REPOSITORY", "WORK_WEBHOOK_URL", "GUIDE_DIR"):  # fmt: skip
        word = word.replace(f"${key}", env[key]).replace(f"${{{key}}}", env[key])
    return word


def _helm_install(st: Stack, words: list[str], env: dict[str, str], work: Balancer, folder: Path) -> Release:
    name, chart = words[2], words[3]
    assert Path(REPO / chart).resolve() == (REPO / "charts" / "flink-failover").resolve(), chart
    flags = words[4:]
    values: dict[str, Any] = {}
    kubeconfig = namespace = ""
    i = 0
    while i < len(flags):
        flag, value = flags[i], flags[i + 1] if i + 1 < len(flags) else ""
        if flag == "--kubeconfig":
            kubeconfig = value
        elif flag in ("-n", "--namespace"):
            namespace = value
        elif flag in ("-f", "--values"):
            _merge(values, yaml.safe_load((REPO / value).read_text()) or {})
        elif flag == "--set":
            key, _, raw = value.partition("=")
            _set(values, key, yaml.safe_load(raw) if raw else "")
        else:
            raise GuideStepFailed(f"helm install {name}: the tier does not know the flag {flag}")
        i += 2
    api = _api_of(st, kubeconfig)
    balancers: dict[tuple[str, str], Balancer] = {}
    role = values.get("role", "member")
    if role == "member":
        _set(values, "policy.storageOptions.s3.endpoint_url", st.s3_endpoint)  # what MinIO users add
        # the tier's GCS and Azure Blob, as a user of those adds them (the guide allows s3 alone)
        others = st.other_storage_options()
        for scheme, options in others.items():
            _set(values, f"policy.storageOptions.{scheme}", options)
        allowed = values.get("policy", {}).get("allowedSchemes")
        if allowed is not None:
            _set(values, "policy.allowedSchemes", [*allowed, *(s for s in others if s not in allowed)])
    if role == "control-plane" and values.get("controlPlane", {}).get("part") == "workload":
        balancers[(name, "https")] = work  # the Service the Karmada API server reaches at $WORK_WEBHOOK_URL
    release = install(
        st.procs, st.tools.helm, st.tools.kubectl, api, name, namespace, values, folder, balancers
    )
    key = {
        "member": f"member-{values.get('member', {}).get('fencing', {}).get('cluster', '')}",
        "estimator": f"estimator-{values.get('estimator', {}).get('cluster', '')}",
        "control-plane": "control-plane",
    }[role]
    st.releases[key] = release
    return release


def _api_of(st: Stack, kubeconfig: str) -> ApiServer:
    if kubeconfig == str(st.karmada.kubeconfig):
        return st.karmada.api
    for member in st.karmada.members.values():
        if kubeconfig == str(member.kubeconfig):
            return member.api
    raise GuideStepFailed(f"no API server of the tier has the kubeconfig {kubeconfig}")


def _merge(into: dict[str, Any], values: dict[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _set(values: dict[str, Any], dotted: str, value: Any) -> None:
    node = values
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
