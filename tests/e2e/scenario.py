"""What the scenarios do and measure on a running stack: a job on Karmada, a failover, the figures.

A :class:`World` is one stack with its operator doubles and its :class:`~tests.e2e.timeline.Timeline`.
Jobs are FlinkDeployments created on the Karmada API server with a PropagationPolicy derived from the
shipped one (``policies/karmada``: only the selected name and, where a scenario needs it, the purge
mode change). Every verdict comes from status sampled on both members; the operator doubles' records
say which checkpoints each job completed (what "lost" is counted against).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.apiserver import ADMIN_TOKEN
from tests.e2e.informer import Key
from tests.e2e.install import Release, restart_pod
from tests.e2e.operator import OperatorDouble, real_metadata
from tests.e2e.pods import Pod
from tests.e2e.procs import wait_until
from tests.e2e.rest import Rest, flink_path
from tests.e2e.stack import BUCKET, POLICIES, Stack
from tests.e2e.timeline import Timeline
from tests.support.operator import Job
from tests.support.s3 import CREDENTIALS

PREFIX = "flink-failover.io"
NAMESPACE = "analytics"
CHECKPOINTS = f"s3://{BUCKET}/checkpoints"
SAVEPOINTS = f"s3://{BUCKET}/savepoints"
TAINT_PREFIX = "e2e.flink-failover.io/"  # the key prefix of every taint the scenarios put on a cluster
EVICT_TAINT = {"key": f"{TAINT_PREFIX}evict", "effect": "NoExecute"}


# The scheme each backend's scenarios name their checkpoint and savepoint directories with.
SCHEMES = {"s3": "s3", "gcs": "gs", "azure": "abfs"}


def storage_dirs(backend: str) -> tuple[str, str]:
    """A job's checkpoint and savepoint directories on ``backend`` (s3, gcs, azure), in BUCKET."""
    if backend == "s3":
        return CHECKPOINTS, SAVEPOINTS
    root = f"{SCHEMES[backend]}://{BUCKET}"
    return f"{root}/checkpoints", f"{root}/savepoints"


def checkpoint_writer(st: Stack) -> Callable[[str, str, int], None]:
    """How a running job completes a checkpoint: its ``_metadata`` last, as Flink writes it, into
    whichever storage its checkpoint directory names, straight (s3:// and s3a:// alike on the tier's S3:
    the job's storage path is its own, a proxy in front of the role's is not the job's)."""

    def write(folder: str, job_id: str, checkpoint: int) -> None:
        st.storage_for(folder).write(
            f"{folder}/{job_id}/chk-{checkpoint}/_metadata", real_metadata(checkpoint)
        )

    return write


def flink_job(
    name: str,
    namespace: str = NAMESPACE,
    upgrade_mode: str = "savepoint",
    checkpoint_dir: str = CHECKPOINTS,
    savepoint_dir: str = SAVEPOINTS,
) -> dict[str, Any]:
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": "flink:1.20",
            "flinkVersion": "v1_20",
            "serviceAccount": "flink",
            "flinkConfiguration": {
                "taskmanager.numberOfTaskSlots": "2",
                "execution.checkpointing.dir": checkpoint_dir,
                "execution.checkpointing.savepoint-dir": savepoint_dir,
            },
            "jobManager": {"resource": {"cpu": 1, "memory": "2048m"}},
            "taskManager": {"resource": {"cpu": 1, "memory": "2048m"}},
            "job": {
                "jarURI": "local:///opt/flink/examples/streaming/StateMachineExample.jar",
                "parallelism": 2,
                "upgradeMode": upgrade_mode,
                "state": "running",
            },
        },
    }


SESSION_JOB = "FlinkSessionJob"


def session_cluster(
    name: str, namespace: str = NAMESPACE, checkpoint_dir: str = CHECKPOINTS, savepoint_dir: str = SAVEPOINTS
) -> dict[str, Any]:
    """A session cluster: a FlinkDeployment without ``spec.job``, the checkpoint and savepoint directories
    of the jobs it runs in its ``flinkConfiguration``."""
    obj = flink_job(name, namespace, checkpoint_dir=checkpoint_dir, savepoint_dir=savepoint_dir)
    del obj["spec"]["job"]
    return obj


def session_job(
    name: str,
    cluster: str,
    namespace: str = NAMESPACE,
    upgrade_mode: str = "savepoint",
    checkpoint_dir: str = "",
) -> dict[str, Any]:
    """A FlinkSessionJob on the session cluster ``cluster``, with no directory of its own (it checkpoints
    where its session cluster's configuration says) unless ``checkpoint_dir`` is given."""
    job: dict[str, Any] = {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": SESSION_JOB,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "deploymentName": cluster,
            "job": {
                "jarURI": "local:///opt/flink/examples/streaming/StateMachineExample.jar",
                "parallelism": 2,
                "upgradeMode": upgrade_mode,
                "state": "running",
            },
        },
    }
    if checkpoint_dir:
        job["spec"]["flinkConfiguration"] = {"execution.checkpointing.dir": checkpoint_dir}
    return job


def kind_and_name(entry: str) -> tuple[str, str]:
    """A name in a scenario's ``jobs`` list: ``name`` (a FlinkDeployment) or ``Kind/name``."""
    kind, _, name = entry.rpartition("/")
    return kind or "FlinkDeployment", name


def propagation_policy(shipped: str, names: list[str], purge_mode: str | None = None) -> dict[str, Any]:
    """The shipped PropagationPolicy selecting ``names`` (the rest as shipped)."""
    policy: dict[str, Any] = yaml.safe_load((POLICIES / shipped).read_text())
    policy["metadata"]["name"] = f"{names[0]}-{policy['metadata']['name'].split('-', 1)[1]}"
    template = policy["spec"]["resourceSelectors"][0]
    policy["spec"]["resourceSelectors"] = [{**template, "name": name} for name in names]
    if purge_mode is not None:
        for kind in ("cluster", "application"):
            if kind in policy["spec"].get("failover", {}):
                policy["spec"]["failover"][kind]["purgeMode"] = purge_mode
    return policy


@dataclass
class World:
    stack: Stack
    operators: dict[str, OperatorDouble]
    timeline: Timeline
    failed: bool = False
    figures: list[str] = field(default_factory=list)
    guide: Any = None  # the guide's run (tests/e2e/guide.GuideRun) when it installed the product

    def where(self, test: str = "") -> str:
        folder = self.stack.folder
        dumped = self.dump(folder / f"state-{test or 'failed'}.json")
        logs = sorted(p.name for p in (folder / "logs").glob("*.log"))
        return (
            f"stack folder (kept): {folder}\nobjects at the failure: {dumped}\n"
            f"process logs in {folder / 'logs'}: {', '.join(logs)}"
        )

    # --- the member role's replicas and what they wrote ---------------------------------------------

    def member_release(self, cluster: str) -> Release:
        return self.stack.releases[f"member-{cluster}"]

    def kill_member_replica(self, cluster: str, index: int) -> Pod:
        """SIGKILL one member-role replica (a pod force-deleted): its webhook and its fencing agent go."""
        pod = self.member_release(cluster).replicas()[index]
        pod.process.signal(signal.SIGKILL)
        pod.process.popen.wait(10)
        return pod

    def restart_member_replica(self, cluster: str, index: int) -> None:
        api = self.stack.member_api(cluster)
        restart_pod(self.stack.procs, api, self.member_release(cluster), index)

    def freeze_member_role(self, cluster: str, frozen: bool = True) -> None:
        """SIGSTOP (``frozen``) or SIGCONT every member-role replica of ``cluster``: its agents poll no
        more until thawed (its webhook answers nothing meanwhile)."""
        for pod in self.member_release(cluster).replicas():
            pod.process.signal(signal.SIGSTOP if frozen else signal.SIGCONT)

    def member_replicas_ready(self, cluster: str) -> bool:
        """Every member-role replica of ``cluster`` answers /readyz with 200 now."""
        import ssl
        import urllib.request

        for pod in self.member_release(cluster).replicas():
            context = ssl.create_default_context(cafile=str(pod.folder / "volumes" / "certs" / "ca.crt"))
            context.check_hostname = False
            url = f"https://127.0.0.1:{pod.port('probes')}/readyz"
            try:
                with urllib.request.urlopen(url, context=context, timeout=3) as answer:
                    if answer.status != 200:
                        return False
            except OSError:
                return False
        return True

    def events(
        self, cluster: str, name: str, reason: str, namespace: str = NAMESPACE
    ) -> list[dict[str, Any]]:
        """The Events on ``cluster`` about the Flink object ``name`` with ``reason``."""
        found = self.stack.member_api(cluster).get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        return [
            e
            for e in found.get("items") or []
            if e.get("reason") == reason and (e.get("regarding") or {}).get("name") == name
        ]

    def modified_time(self, path: str) -> float | None:
        """The storage's modification time (POSIX seconds) of an object, read straight from S3."""
        info = (
            self._s3().info(path.split("://", 1)[-1]) if self._s3().exists(path.split("://", 1)[-1]) else None
        )
        modified = (info or {}).get("LastModified")
        return modified.timestamp() if modified is not None else None

    def record_names(self, folder: str) -> list[str]:
        """The names of the objects in ``folder`` on S3 now (a job's fencing records): none without it."""
        try:
            found = self._s3().ls(folder.split("://", 1)[-1], refresh=True)
        except FileNotFoundError:
            return []
        return sorted(str(path).rsplit("/", 1)[-1] for path in found)

    def _s3(self) -> Any:
        import s3fs

        if not hasattr(self, "_fs"):
            self._fs = s3fs.S3FileSystem(
                endpoint_url=self.stack.s3_endpoint,
                key=CREDENTIALS["key"],
                secret=CREDENTIALS["secret"],
                skip_instance_cache=True,
                use_listings_cache=False,
            )
        return self._fs

    def save_metrics(self) -> None:
        """Every API server's /metrics beside the logs (API Priority and Fairness waits among them)."""
        servers = {"karmada-apiserver": self.stack.karmada.api}
        servers.update({name: m.api for name, m in self.stack.karmada.members.items()})
        for name, server in servers.items():
            try:
                text = Rest(server.url, server.ca, ADMIN_TOKEN).raw("/metrics")
            except Exception as exc:
                text = f"# not read: {exc}\n"
            (self.stack.folder / "logs" / f"{name}.metrics.txt").write_text(text)

    def dump(self, path: Path) -> Path:
        """Bindings, Works, Clusters and every member's Flink objects, as the API servers hold them now."""
        karmada = self.stack.karmada_api()
        state: dict[str, Any] = {}
        for what, where in (
            ("resourcebindings", "/apis/work.karmada.io/v1alpha2/resourcebindings"),
            ("works", "/apis/work.karmada.io/v1alpha1/works"),
            ("clusters", "/apis/cluster.karmada.io/v1alpha1/clusters"),
        ):
            try:
                state[what] = karmada.get(where).get("items")
            except Exception as exc:
                state[what] = str(exc)
        for cluster in self.operators:
            state[f"{cluster}/flinkdeployments"] = list(self.timeline.informers[cluster].snapshot().values())
            state[f"{cluster}/flinksessionjobs"] = list(self.timeline.sessions[cluster].snapshot().values())
        path.write_text(describe(state))
        return path

    # --- the Karmada side -------------------------------------------------------------------------

    def ensure_namespace(self, namespace: str = NAMESPACE) -> None:
        self.stack.apply_karmada([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])

    def submit(self, jobs: list[dict[str, Any]], policy: dict[str, Any]) -> None:
        self.ensure_namespace(jobs[0]["metadata"]["namespace"])
        self.stack.apply_karmada([policy, *jobs])

    def binding(
        self, name: str, namespace: str = NAMESPACE, kind: str = "FlinkDeployment"
    ) -> dict[str, Any] | None:
        path = f"/apis/work.karmada.io/v1alpha2/namespaces/{namespace}/resourcebindings/{name}-{kind.lower()}"
        result: dict[str, Any] | None = self.stack.karmada_api().get(path, ok_missing=True)
        return result

    def placed_on(self, name: str, namespace: str = NAMESPACE) -> list[str]:
        binding = self.binding(name, namespace) or {}
        return [c["name"] for c in (binding.get("spec") or {}).get("clusters") or []]

    def taint(self, cluster: str, taint: dict[str, str] = EVICT_TAINT) -> None:
        api = self.stack.karmada_api()
        path = f"/apis/cluster.karmada.io/v1alpha1/clusters/{cluster}"
        current = api.get(path)
        taints = [t for t in (current["spec"].get("taints") or []) if t["key"] != taint["key"]]
        api.merge_patch(path, {"spec": {"taints": [*taints, dict(taint)]}})

    def untaint(self, cluster: str, key: str = EVICT_TAINT["key"]) -> None:
        self._keep_taints(cluster, lambda t: t["key"] != key)

    def untaint_all(self, cluster: str) -> None:
        """Every taint the tier's scenarios put on ``cluster`` (theirs by the key's prefix)."""
        self._keep_taints(cluster, lambda t: not t["key"].startswith(TAINT_PREFIX))

    def _keep_taints(self, cluster: str, keep: Callable[[dict[str, str]], bool]) -> None:
        api = self.stack.karmada_api()
        path = f"/apis/cluster.karmada.io/v1alpha1/clusters/{cluster}"
        taints = api.get(path)["spec"].get("taints") or []
        kept = [t for t in taints if keep(t)]
        if kept != taints:
            api.merge_patch(path, {"spec": {"taints": kept or None}})

    def delete_job(self, name: str, namespace: str = NAMESPACE, kind: str = "FlinkDeployment") -> None:
        self.stack.karmada_api().delete(flink_path(kind, namespace, name))

    # --- the member side --------------------------------------------------------------------------

    def member_object(self, cluster: str, name: str, namespace: str = NAMESPACE) -> dict[str, Any] | None:
        return self.timeline.get(cluster, namespace, name)

    def running_job(self, cluster: str, key: Key) -> Job | None:
        jobs = [j for j in self.operators[cluster].jobs_of(*key) if j.ended is None]
        return jobs[-1] if jobs else None

    def wait_running(self, key: Key, cluster: str | None = None, timeout: float = 120) -> str:
        """Until the job is RUNNING by status on ``cluster`` (any member when None); that member."""
        found: list[str] = []

        def running() -> bool:
            found[:] = [c for c in self.timeline.running_on(key) if cluster is None or c == cluster]
            return bool(found)

        wait_until(f"{key} RUNNING on {cluster or 'a member'}", running, timeout, interval=0.1)
        return found[0]

    def wait_checkpoints(self, cluster: str, key: Key, count: int, timeout: float = 60) -> Job:
        def enough() -> bool:
            job = self.running_job(cluster, key)
            return job is not None and len(job.checkpoints) >= count

        wait_until(f"{count} checkpoints of {key} on {cluster}", enough, timeout, interval=0.1)
        job = self.running_job(cluster, key)
        assert job is not None
        return job

    def wait_captured(
        self, name: str, cluster: str, job_id: str, namespace: str = NAMESPACE, kind: str = "FlinkDeployment"
    ) -> None:
        """Until the control plane recorded the job RUNNING on ``cluster`` (the binding's annotation)."""

        def captured() -> bool:
            binding = self.binding(name, namespace, kind) or {}
            record = ((binding.get("metadata") or {}).get("annotations") or {}).get(
                f"{PREFIX}/last-known-state"
            )
            return bool(record) and job_id in str(record) and cluster in str(record)

        wait_until(f"{name}'s state on {cluster} captured", captured, 60, interval=0.2)

    def restart(self, job: Job, cluster: str) -> Job | None:
        """The job that started on ``cluster`` after ``job`` (its successor there), if any."""
        later = [j for j in self.operators[cluster].jobs_of(*job.key) if j.started > job.started]
        return later[0] if later else None

    def jobs(self, key: Key) -> dict[str, list[Job]]:
        return {cluster: operator.jobs_of(*key) for cluster, operator in self.operators.items()}

    def work_webhook_lines(self) -> dict[str, int]:
        """How many lines each product pod's log has now (the control plane's among them): audit lines
        after these are a burst's."""
        return {
            pod.name: _line_count(pod.process.log)
            for release in self.stack.releases.values()
            for pod in release.replicas()
        }

    def admissions(self, release: str, since: dict[str, int], kind: str) -> list[dict[str, Any]]:
        """The audit lines of ``kind`` (Work, FlinkDeployment) every pod of ``release`` logged after
        ``since`` (from :meth:`work_webhook_lines`), each as the server wrote it (``ms``: server-side)."""
        out: list[dict[str, Any]] = []
        for pod in self.stack.releases[release].replicas():
            lines = pod.process.log.read_text(errors="replace").splitlines()[since.get(pod.name, 0) :]
            for line in lines:
                if '"msg":"admission"' not in line or not line.startswith("{"):
                    continue
                entry = json.loads(line)
                if entry.get("kind") == kind:
                    out.append(entry)
        return out

    def work_webhook_latencies(self, since: dict[str, int]) -> list[tuple[float, str]]:
        """Server-side milliseconds of every Work admission logged after ``since`` (the audit line's ``ms``),
        each with where its binding came from (``cache``, ``api``, or ``-`` without a Flink manifest read)."""
        out: list[tuple[float, str]] = []
        for entry in self.admissions("control-plane", since, "Work"):
            sources = {m.get("bindingFrom", "") for m in entry.get("manifests") or []} or {"-"}
            out.append((float(entry["ms"]), ",".join(sorted(sources))))
        return out

    def estimates(self, workload: str, namespace: str = NAMESPACE) -> dict[str, int]:
        """The sets each member's estimator last answered for ``workload`` (its "estimated" log lines)."""
        out: dict[str, int] = {}
        for cluster in self.operators:
            for pod in self.stack.releases[f"estimator-{cluster}"].replicas():
                for line in pod.process.log.read_text(errors="replace").splitlines():
                    if '"msg":"estimated"' not in line:
                        continue
                    entry = json.loads(line)
                    if str(entry.get("object", "")).endswith(f"{namespace}/{workload}"):
                        out[cluster] = int(entry["sets"])
        return out

    def wait_scheduler_reaches_estimators(self) -> None:
        """Until karmada-scheduler has connected to both members' estimators: it dials them on its own
        time (every few seconds until it connects) and, until then, schedules by its general estimator
        alone (its log says "cluster member1 does not exist in estimator cache")."""
        log = self.stack.karmada.components["scheduler"]

        def connected() -> bool:
            text = log.log.read_text(errors="replace")
            return all(f"of cluster({c}) has been established" in text for c in self.operators)

        wait_until("karmada-scheduler connected to both estimators", connected, 120, [log])

    def record(self, line: str) -> None:
        from tests.e2e import conftest

        text = f"[Karmada {self.stack.version}] {line}"
        self.figures.append(text)
        conftest.FIGURES.append(text)


@dataclass(frozen=True)
class Outcome:
    """A failover's figures, from status samples and the jobs' checkpoint records."""

    old: Job
    new: Job
    old_cluster: str
    new_cluster: str
    two_running_seconds: float
    lost: list[int]
    restore_seconds: float  # from the trigger to the new job RUNNING by status
    annotations: dict[str, str]

    def line(self, scenario: str) -> str:
        return (
            f"{scenario}: {self.old_cluster} -> {self.new_cluster}, "
            f"restored {self.new.started_from.rsplit('/', 1)[-1]} "
            f"of the old job's chk-{self.old.checkpoints[-1][0] if self.old.checkpoints else 0}, "
            f"two RUNNING {self.two_running_seconds:.2f} s, checkpoints lost {len(self.lost)}, "
            f"restore {self.restore_seconds:.1f} s, "
            f"failover-count {self.annotations.get(f'{PREFIX}/failover-count')}"
        )


def _line_count(path: Path) -> int:
    try:
        return len(path.read_text(errors="replace").splitlines())
    except OSError:
        return 0


def lost_after(old: Job, new: Job) -> list[int]:
    """Checkpoints the old job completed after the one the new job started from."""
    name = new.started_from.rstrip("/").rsplit("/", 1)[-1]
    start = int(name[4:]) if name.startswith("chk-") and name[4:].isdigit() else 0
    return sorted(n for n, _ in old.checkpoints if n > start)


def cleanup(world: World, entries: list[str], namespace: str = NAMESPACE) -> None:
    """A scenario's jobs (FlinkDeployments by name, other kinds as ``Kind/name``) and their policies
    deleted from Karmada, gone from every member, no taint left: the next scenario starts from clean, Ready
    members whatever ran before it."""
    api = world.stack.karmada_api()
    for cluster in world.operators:  # a scenario that failed half-way may have left any of its taints
        world.untaint_all(cluster)
    names = [kind_and_name(entry) for entry in entries]
    for kind, name in names:
        world.delete_job(name, namespace, kind)
        # what kube-controller-manager's garbage collector does for a Karmada control plane (the tier
        # runs none): the ResourceBinding owned by the deleted template goes, Karmada then removes its Works
        api.delete(
            f"/apis/work.karmada.io/v1alpha2/namespaces/{namespace}/resourcebindings/{name}-{kind.lower()}"
        )
    policies = api.get(f"/apis/policy.karmada.io/v1alpha1/namespaces/{namespace}/propagationpolicies")
    for policy in policies.get("items") or []:
        selected = {s.get("name") for s in policy["spec"].get("resourceSelectors") or []}
        if selected & {name for _, name in names}:
            api.delete(
                f"/apis/policy.karmada.io/v1alpha1/namespaces/{namespace}/propagationpolicies/"
                f"{policy['metadata']['name']}"
            )

    def gone() -> bool:
        return all(world.member_object(c, n, namespace) is None for c in world.operators for _, n in names)

    wait_until(f"{names} gone from the members", gone, 120)


def describe(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str)
