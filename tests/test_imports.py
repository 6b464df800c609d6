"""Imports run one way: the server knows no role, the shared code knows no role, roles know no other
role, one composition root wires them, and the pure core reaches no I/O library, not even indirectly.
Inside each role, modules stand in layers and import only from lower ones (docs/architecture.md).

Read from the source (every import statement, also inside functions; not the ones under
``if TYPE_CHECKING:``), so a lazy import cannot hide a wrong direction.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "webhook"

ROLES = ("webhook.member", "webhook.controlplane", "webhook.estimator")
COMPOSITION_ROOT = "webhook.roles"
# The commands stand above the roles and the rooms: only the command line (and the commands) import them.
COMMANDS = "webhook.commands"
COMMAND_LINE = ("webhook.cli", "webhook.__main__")
# Capabilities the roles use, bottom first: each imports no role and only the rooms below it. The policy
# is the lowest: restore and fencing read it, it reads neither (issue 48).
POLICY = "webhook.policy"
ROOMS = (POLICY, "webhook.placement", "webhook.restore", "webhook.fencing", "webhook.keeper")
# Libraries that do I/O (storage, HTTP, Kubernetes, serving, metrics) and the stdlib's network modules.
IO_LIBRARIES = (
    "fsspec", "s3fs", "gcsfs", "adlfs", "boto3", "botocore", "flask", "werkzeug", "gunicorn",
    "kubernetes", "prometheus_client", "requests", "urllib3", "socket", "ssl", "http", "subprocess",
)  # fmt: skip
# Decisions over plain data: tests drive them without servers, storage or clusters.
PURE_CORE = (
    "webhook.common.admission",
    "webhook.common.checkpoints",
    "webhook.common.contract",
    "webhook.common.correlator",
    "webhook.common.flink",
    "webhook.common.patch",
    "webhook.common.untyped",
    "webhook.common.paths",
    "webhook.common.flink_reads",
    "webhook.policy.backend_options",
    "webhook.policy.schema",
    "webhook.policy.fencing",
    "webhook.restore.metadata",
    "webhook.restore.outcome",
    "webhook.restore.updates",
    "webhook.restore.record",
    "webhook.restore.checks",
    "webhook.restore.restoring",
    "webhook.restore.verdict",
    "webhook.restore.decide",
    "webhook.restore.snapshots",
    "webhook.fencing.protocol",
    "webhook.fencing.operator",
    "webhook.fencing.layout",
    "webhook.fencing.copies",
    "webhook.fencing.directories",
    "webhook.fencing.holdtexts",
    "webhook.fencing.patches",
    "webhook.fencing.renewal",
    "webhook.fencing.admitted",
    "webhook.fencing.effects",
    "webhook.fencing.decide",
    "webhook.fencing.starts",
    "webhook.fencing.prechecks",
    "webhook.fencing.takeback",
    "webhook.member.failover",
    "webhook.member.keeper",
    "webhook.member.firstcopy",
    "webhook.keeper.decide",
    "webhook.keeper.inject",
    "webhook.keeper.session",
    "webhook.controlplane.audit",
    "webhook.controlplane.binding",
    "webhook.controlplane.work",
    "webhook.controlplane.relocation",
    "webhook.controlplane.capture",
    "webhook.controlplane.record",
    "webhook.estimator.answer",
    "webhook.estimator.state",
    "webhook.estimator.workloads",
    "webhook.estimator.memo",
    "webhook.placement.model",
    "webhook.placement.quantity",
    "webhook.placement.prepare",
    "webhook.placement.grouping",
    "webhook.placement.bounds",
    "webhook.placement.packing",
    "webhook.placement.firstfit",
    "webhook.placement.estimate",
    "webhook.placement.select",
)
# Cross-role imports still in the tree, each a known debt (none today).
KNOWN_CROSS_ROLE: set[tuple[str, str]] = set()
# Inside a role, bottom first: a module imports only from lower layers (a name may be a subpackage; its
# modules may import each other). A module placed nowhere fails the test: add it where it belongs.
ROLE_LAYERS: dict[str, tuple[tuple[str, ...], ...]] = {
    # The member role's admission glue over the restore and fencing rooms.
    "webhook.member": (
        # review's failover CREATE; who releases; session clusters; the lease keeper's part (pure)
        ("failover", "identity", "sessions", "keeper"),
        ("firstcopy",),  # the keeper of a copy no failover made (pure)
        # the admission answer; the serve options; 1.29 or not; an admission's heartbeat looked at again
        ("handler", "options", "kubeversion", "followup"),
    ),
    # A checkpoint listed, verified, chosen: the pure core below, storage (the I/O edge) on top.
    "webhook.restore": (
        # Flink's _metadata read from bytes; what a decision is; what the decision asks storage (pure);
        # what a restore decided from, kept on the object (pure)
        ("metadata", "outcome", "snapshots", "record"),
        # what an UPDATE keeps; is a snapshot restorable; which Flink restores it, what a rewind leaves
        ("updates", "checks", "restoring"),
        ("decide", "verdict"),  # the decision; what a full check found, kept (both pure)
        ("storage",),  # the I/O edge: listed, verified, searched through fsspec
    ),
    # The policy, declared, validated and loaded once: below restore and fencing, which read it.
    "webhook.policy": (
        ("schema", "backend_options"),  # how a policy field is declared; what each fsspec backend takes
        ("fencing",),  # its fencing part (one running copy's timings)
        ("restore",),  # the whole policy, declared once
        ("load",),  # which policy file is read, read once, with what it probably gets wrong
    ),
    "webhook.restore.storage": (
        ("backends",),  # each backend's client and defaults, the deadline, the errors
        # a lookup's requests counted and run; S3 HEADs by presigned URL; where lookups run, hung storage
        ("requests", "presigned", "pool"),
        ("listings", "ranges"),  # folders, prefixes and files read, once per lookup; S3 key ranges
        ("verify",),  # the files a _metadata names, with the verdict
        ("search",),  # which snapshots a job has: CheckpointStorage
    ),
    # One running copy: who may run (pure) below, the records, the agent and its commands above.
    "webhook.fencing": (
        # who may run, what the operator reports, names; the tasks a loop starts and does not wait for
        ("protocol", "operator", "layout", "metrics", "background"),
        # where a copy's records live; its hold texts; storage calls with a deadline; who renews, when,
        # and the heartbeat loop's effects (pure); an admission's heartbeat, whether it goes (pure)
        ("directories", "holdtexts", "lanes", "renewal", "admitted"),
        # a Flink object as fencing sees it; what a decision asks for (pure); the records read and
        # written; when a copy left to its keeper is taken back (pure)
        ("copies", "effects", "records", "takeback"),
        # the patches that move a copy; the poll's decision for one copy; whose prechecks are due (pure)
        ("patches", "decide", "prechecks"),
        # what a release and a resume start from (pure); the webhook's side; the agent's Kubernetes
        # edge; the heartbeat loop; what a poll reads
        ("starts", "gate", "flinkapi", "renewer", "reads"),
        # a copy's object patched, with its Event; the prechecks run; what a poll shows
        ("patcher", "prechecker", "report"),
        ("executors",),  # the calls that carry out effects
        ("agent", "status"),  # the loops that execute decisions; every job's fencing state
        ("runner", "http"),  # one agent per server; /fencing/status
    ),
    "webhook.controlplane": (
        ("binding", "record", "audit", "leader"),  # Karmada's objects, our record, the answer, the election
        ("capture", "relocation", "work", "lookup", "karmada", "options"),  # decisions, reads, settings
        ("watch", "handler"),  # the capture loop, the Work webhook
        ("serve", "offline"),  # wired for the server, for review
    ),
    "webhook.estimator": (
        ("options", "proto", "workloads", "memo"),  # settings, messages, Deployments' pods, shared answers
        ("wire", "state", "answer", "member_api"),  # requests read, the watched state, the replies
        ("grpcserver",),  # the gRPC edge
        ("run",),  # wired for serve
    ),
    # The lease keeper beside a JobManager (issue 47): its decisions (pure), the JobManager, its loops; a
    # room above fencing (the member webhook will inject its sidecar: ``inject``), with its command.
    "webhook.keeper": (
        # hold, renew, stop (pure); the JobManager found and killed; its metrics; its sidecar (pure)
        # and the JobManager's REST endpoint (a session cluster's keeper: running jobs, a cancel)
        ("decide", "jobmanager", "metrics", "inject", "flinkrest"),
        # what both keepers' loops share (threads, the kill); a session cluster's rules (pure)
        ("loops", "session"),
        # the lister, renewer and guard loops: a job's keeper, a session cluster's
        ("keeper", "session_keeper"),
        ("http",),  # /readyz, /healthz, /metrics
    ),
    # Not a role: the server every webhook role runs in (issue 31: layered like the roles).
    "webhook.server": (
        ("config", "logs", "metrics", "probes", "runtime", "tls"),  # settings, logs, metrics, probes, TLS
        ("instrument",),  # what the server adds around a handler
        ("app",),  # the Flask routes
        ("run",),  # gunicorn, wired for serve
    ),
    # Not a role (used by the control plane and the estimator), but layered the same way (issue 24).
    "webhook.placement": (
        ("errors",),  # PlacementInputError
        ("quantity", "fields"),  # Kubernetes quantities; reading untyped input fields
        ("model",),  # the plain data of a placement question
        ("prepare", "cluster", "components"),  # the core's input, from Nodes/Pods and from components
        ("grouping", "firstfit", "live"),  # sharing and node classes; Karmada's count; live contexts
        ("bounds", "packing"),  # the upper bound; the packings searched
        ("estimate",),  # how many sets fit (the core's answer)
        ("select",),  # which clusters
        ("api",),  # the Python API (docs/placement.md)
        ("http",),  # the HTTP edge (its command line: commands/placement.py)
    ),
    # Each command's arguments and entry (cli.py dispatches), above the roles and rooms they run.
    "webhook.commands": (
        # what release and status do first (the target, the policy, the cluster); review's requests from FILE
        ("fencing", "review_requests"),
        ("review_answers",),  # what review prints of each answer
        ("serve", "review", "certs", "placement", "release", "status", "keeper"),
    ),
}
# The longest import chain inside a package: the control plane (issue 18: it was 8), placement (issue 24:
# its ten layers above, each a question of its own; a new one must make its case here).
MAX_FLOORS = {"webhook.controlplane": 4, "webhook.placement": 10}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def imports_of(source: str, modules: frozenset[str]) -> set[str]:
    """Absolute module names one module imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(
                f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules
            )
    return found


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    modules = frozenset(files)
    graph = {name: imports_of(path.read_text(encoding="utf-8"), modules) for name, path in files.items()}
    for name, imported in graph.items():  # importing a module runs its parent packages' __init__ first
        parts = name.split(".")
        imported.update(".".join(parts[:n]) for n in range(2, len(parts)))  # webhook/__init__: a version
    return graph


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _room_of(name: str) -> str | None:
    return next((room for room in ROOMS if _within(name, room)), None)


def _role_of(name: str) -> str | None:
    return next((role for role in ROLES if _within(name, role)), None)


def violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every import that points the wrong way, as 'importer -> imported: rule'."""
    out = []
    for module, imported in sorted(graph.items()):
        own_role = _role_of(module)
        roles_used = {r for name in imported if (r := _role_of(name)) is not None and r != own_role}
        for name in sorted(imported):
            if not _within(name, "webhook"):
                continue
            role = _role_of(name)
            if _within(module, "webhook.server") and not (
                _within(name, "webhook.server") or _within(name, "webhook.common")
            ):
                out.append(f"{module} -> {name}: the server knows no role")
            if _within(module, "webhook.common") and not _within(name, "webhook.common"):
                out.append(f"{module} -> {name}: shared code imports only shared code")
            if _within(name, COMMANDS) and not (_within(module, COMMANDS) or module in COMMAND_LINE):
                out.append(f"{module} -> {name}: only the command line imports a command")
            if _within(module, POLICY) and not (_within(name, POLICY) or _within(name, "webhook.common")):
                out.append(f"{module} -> {name}: the policy imports only itself and shared code")
            room = _room_of(module)
            if room is not None and role is not None:
                out.append(f"{module} -> {name}: a room ({room}) is used by roles and imports none")
            other_room = _room_of(name)
            if room is not None and other_room is not None and ROOMS.index(other_room) > ROOMS.index(room):
                out.append(f"{module} -> {name}: a room imports only rooms below it ({' < '.join(ROOMS)})")
            if (
                own_role is not None
                and role is not None
                and role != own_role
                and (own_role, name) not in KNOWN_CROSS_ROLE
            ):
                out.append(f"{module} -> {name}: a role imports no other role")
        if module != COMPOSITION_ROOT and own_role is None and len(roles_used) > 1:
            out.append(f"{module} -> {sorted(roles_used)}: only {COMPOSITION_ROOT} wires several roles")
    for module in PURE_CORE:
        for reached, library in _io_reached(graph, module):
            out.append(f"{module} -> {library} (through {reached}): the pure core reaches no I/O library")
    return out


def _unit(module: str, role: str) -> str:
    """The ROLE_LAYERS name a module answers to: its first part below the role's package."""
    return module[len(role) + 1 :].split(".")[0] if module != role else ""


def layer_violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every import inside a role that does not point to a lower layer, and every module not placed."""
    out = []
    for role, layers in ROLE_LAYERS.items():
        floor = {name: i for i, names in enumerate(layers) for name in names}
        for module, imported in sorted(graph.items()):
            if not _within(module, role) or module == role:
                continue
            unit = _unit(module, role)
            if unit not in floor:
                out.append(f"{module}: not placed in ROLE_LAYERS[{role!r}]")
                continue
            for name in sorted(imported):
                other = _unit(name, role) if _within(name, role) and name != role else None
                if other is None or other == unit or other not in floor:
                    continue
                if floor[other] >= floor[unit]:
                    out.append(f"{module} -> {name}: inside a role, a module imports only from lower layers")
    return out


def floors(graph: Mapping[str, set[str]], package: str) -> dict[str, int]:
    """Each module's floor inside ``package``: 1 + the highest floor it imports there (1: none)."""
    inside = {m for m in graph if _within(m, package) and m != package}
    memo: dict[str, int] = {}

    def floor(module: str, path: tuple[str, ...] = ()) -> int:
        if module not in memo:
            below = [n for n in graph[module] if n in inside and n != module and n not in path]
            memo[module] = 1 + max((floor(n, (*path, module)) for n in below), default=0)
        return memo[module]

    return {m: floor(m) for m in inside}


def _io_reached(graph: Mapping[str, set[str]], start: str) -> list[tuple[str, str]]:
    seen, todo, hits = {start}, [start], []
    while todo:
        module = todo.pop()
        for name in sorted(graph.get(module, ())):
            top = name.split(".")[0]
            if top in IO_LIBRARIES:
                hits.append((module, name))
            elif name in graph and name not in seen:
                seen.add(name)
                todo.append(name)
    return hits


def test_imports_point_one_way() -> None:
    graph = import_graph()
    assert all(module in graph for module in PURE_CORE), sorted(set(PURE_CORE) - set(graph))
    assert violations(graph) == []


def test_inside_each_role_imports_point_down() -> None:
    assert layer_violations(import_graph()) == []


def test_the_control_plane_and_placement_stay_within_their_floors() -> None:
    graph = import_graph()
    for package, most in MAX_FLOORS.items():
        deepest = max(floors(graph, package).items(), key=lambda item: item[1])
        assert deepest[1] <= most, deepest


@pytest.mark.parametrize(
    ("graph", "rule"),
    [
        ({"webhook.controlplane.watch": {"webhook.controlplane.handler"}}, "only from lower layers"),
        ({"webhook.controlplane.leader": {"webhook.controlplane.watch"}}, "only from lower layers"),
        ({"webhook.restore.decide": {"webhook.restore.storage"}}, "only from lower layers"),
        ({"webhook.estimator.state": {"webhook.estimator.grpcserver"}}, "only from lower layers"),
        ({"webhook.estimator.cache": set()}, "not placed"),
        ({"webhook.placement.model": {"webhook.placement.estimate"}}, "only from lower layers"),
        ({"webhook.placement.estimate": {"webhook.placement.api"}}, "only from lower layers"),
        ({"webhook.placement.newthing": set()}, "not placed"),
        ({"webhook.commands.fencing": {"webhook.commands.status"}}, "only from lower layers"),
    ],
)
def test_a_wrong_direction_inside_a_role_is_caught(graph: dict[str, set[str]], rule: str) -> None:
    assert any(rule in v for v in layer_violations(graph)), layer_violations(graph)


def test_floors_count_the_longest_chain() -> None:
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": set(), "p.d": {"p.c"}}
    assert floors(graph, "p") == {"p.a": 3, "p.b": 2, "p.c": 1, "p.d": 2}


def test_known_cross_role_imports_still_exist() -> None:
    """An allowance nothing needs any more is removed, so the list only shrinks."""
    graph = import_graph()
    used = {
        (role, name)
        for module, imported in graph.items()
        if (role := _role_of(module)) is not None
        for name in imported
        if (role, name) in KNOWN_CROSS_ROLE
    }
    assert used == KNOWN_CROSS_ROLE


@pytest.mark.parametrize(
    ("graph", "rule"),
    [
        ({"webhook.server.app": {"webhook.member.handler"}}, "the server knows no role"),
        ({"webhook.common.flink": {"webhook.policy.restore"}}, "shared code imports only shared code"),
        ({"webhook.member.handler": {"webhook.controlplane.work"}}, "a role imports no other role"),
        ({"webhook.placement.api": {"webhook.controlplane.binding"}}, "is used by roles and imports none"),
        ({"webhook.fencing.agent": {"webhook.member.sessions"}}, "is used by roles and imports none"),
        ({"webhook.restore.storage": {"webhook.fencing.lanes"}}, "a room imports only rooms below it"),
        ({"webhook.policy.restore": {"webhook.restore.compat"}}, "a room imports only rooms below it"),
        ({"webhook.policy.fencing": {"webhook.fencing.protocol"}}, "a room imports only rooms below it"),
        (
            {"webhook.policy.load": {"webhook.server.config"}},
            "the policy imports only itself and shared code",
        ),
        (
            {"webhook.commands.review": {"webhook.member.handler", "webhook.controlplane.offline"}},
            f"only {COMPOSITION_ROOT} wires several roles",
        ),
        (
            {"webhook.restore.decide": {"webhook.restore.storage"}, "webhook.restore.storage": {"fsspec"}},
            "the pure core reaches no I/O library",
        ),
    ],
)
def test_a_wrong_direction_is_caught(graph: dict[str, set[str]], rule: str) -> None:
    assert any(rule in v for v in violations(graph)), violations(graph)


def test_restore_and_fencing_read_the_policy() -> None:
    """The arrows the policy room is for: restore and fencing import it, it imports shared code."""
    graph = {
        "webhook.restore.decide": {"webhook.policy.restore"},
        "webhook.fencing.copies": {"webhook.policy.fencing"},
        "webhook.policy.restore": {"webhook.policy.schema", "webhook.common.flink_reads"},
    }
    assert violations(graph) == []


def test_the_command_line_runs_the_commands_and_the_commands_run_the_roles() -> None:
    graph = {
        "webhook.cli": {"webhook.commands.serve", "webhook.commands.review"},
        "webhook.commands.serve": {"webhook.roles", "webhook.server.run"},
        "webhook.commands.review": {"webhook.roles", "webhook.member.sessions"},
    }
    assert violations(graph) == []


def test_lazy_imports_count_and_type_checking_ones_do_not() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import flask\n"
        "def f():\n    from webhook.member import handler\n"
    )
    found = imports_of(source, frozenset({"webhook.member.handler"}))
    assert "webhook.member.handler" in found and "flask" not in found


def test_offline_review_and_serve_arguments_load_no_web_framework() -> None:
    """``flink-failover review`` runs without Flask or gunicorn in the process."""
    code = (
        "import sys, webhook.commands.review, webhook.commands.serve, webhook.roles, webhook.cli\n"
        "webhook.cli.build_parser()\n"
        "print(sorted(m for m in ('flask', 'werkzeug', 'gunicorn', 'fsspec') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# A module holds one job; past about 500 lines it holds two (issue 37). The exception reads one binary
# format, Flink's _metadata, in one place, where a split would scatter the format across modules.
MAX_MODULE_LINES = 500
LONG_MODULES = {"webhook/restore/metadata.py"}


def test_no_module_outgrows_one_job() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in PACKAGE.rglob("*.py")
        if "proto" not in p.parts
        and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert set(long) == LONG_MODULES, long
