"""The guides (docs/guide*.md) as scripts: their shell steps in order, each with what it needs to run.

Every ```sh block of a guide is one step, and the line before it says what kind (an HTML comment, which a
reader of the rendered page never sees):

    <!-- step: run -->                       runs against a loopback Karmada (kube-apiservers, no pods)
    <!-- step: run; prelude -->              runs first: the variables and functions the other steps use
    <!-- step: run; needs: members, ... -->  runs once the tier has stood in for what pods would do
    <!-- step: render -->                    needs pods or a registry: rendered and validated instead

The end-to-end tier executes the ``run`` steps in order against the real Karmada (each in a shell that
has run the prelude: ``prelude(steps) + step.text``), establishing every condition a step ``needs``
(:data:`NEEDS`) before it; the unit tier (tests/chart/test_guide.py) renders and validates every
``render`` step and checks what the ``run`` steps name. A block without a marker, an unknown kind or an
unknown need is a :class:`GuideError`, so a guide cannot grow a command nobody checks.
"""

from __future__ import annotations

import enum
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GUIDES = tuple(sorted((REPO / "docs").glob("guide*.md")))


class Mode(enum.Enum):
    RUN = "run"  # kubectl apply/get/create/wait, helm install of what runs no pods, flink-failover
    RENDER = "render"  # helm install of pods, image build and push: rendered and validated only


# What a step may need that the loopback tier has no pods for: it stands in for each (runs the role as a
# process, plays the operator, stops a cluster) before running a step that names it.
NEEDS = {
    "control-plane": "the control-plane workload release runs: the Work webhook answers at $WORK_WEBHOOK_URL "
    "with its CA in the registration's caBundle, and the capture records bindings",
    "members": "the member release runs on member1 and member2 (webhook, backstop and fencing agent as "
    "docs/guide/values-member.yaml configures them, cluster names member1 and member2)",
    "flink-operator": "each member's Flink operator reconciles FlinkDeployments (writes their status; a "
    "suspended job stops)",
    "storage": "the checkpoint storage of docs/guide/restore-policy.yaml answers (s3://flink-state, with "
    "the checkpoints the running job wrote)",
    "cluster-down": "the cluster named in $GUIDE_DIR/runs-on is stopped or cut off from the Karmada "
    "control plane",
}

MARKER = re.compile(r"^<!--\s*step:\s*(?P<spec>.*?)\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>\S*)\s*$")


class GuideError(ValueError):
    """A guide that is not a script: the message names the file and line."""


@dataclass(frozen=True)
class Step:
    source: Path
    line: int  # of the opening fence, from 1
    index: int  # place in its guide, from 1
    section: str  # the heading it is under
    mode: Mode
    text: str  # the block's shell text, as written
    needs: tuple[str, ...] = ()
    prelude: bool = False

    @property
    def commands(self) -> list[str]:
        """The commands, one per logical line: continuations joined, comments and here-document bodies
        dropped (a here-document is part of the command that opens it)."""
        out: list[str] = []
        lines = self.text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1].rstrip() + " " + lines[i].strip()
            i += 1
            heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
            if heredoc:
                while i < len(lines) and lines[i].strip() != heredoc.group(1):
                    i += 1
                i += 1
            stripped = _strip_comment(line).strip()
            if stripped:
                out.append(stripped)
        return out

    def words(self) -> list[list[str]]:
        """Each command's words (shell quoting removed, ``$VAR`` left as written)."""
        return [shlex.split(c, comments=True) for c in self.commands]

    def heredocs(self) -> list[str]:
        """The bodies of the here-documents the step writes, as written (variables unexpanded)."""
        return [m.group(2) for m in re.finditer(r"<<-?\s*'?(\w+)'?[^\n]*\n(.*?)^\1$", self.text, re.M | re.S)]

    def where(self) -> str:
        return f"{_shown(self.source)}:{self.line}"


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _strip_comment(line: str) -> str:
    """The line without a trailing ``# comment`` (a ``#`` outside quotes, after a space or at the start)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _marker(spec: str, where: str) -> tuple[Mode, tuple[str, ...], bool]:
    parts = [p.strip() for p in spec.split(";") if p.strip()]
    try:
        mode = Mode(parts[0])
    except (IndexError, ValueError):
        raise GuideError(
            f"{where}: step kind must be one of {[m.value for m in Mode]}, got {spec!r}"
        ) from None
    needs: tuple[str, ...] = ()
    prelude = False
    for part in parts[1:]:
        key, _, value = part.partition(":")
        if key.strip() == "needs" and value.strip():
            needs = tuple(n.strip() for n in value.split(","))
            unknown = [n for n in needs if n not in NEEDS]
            if unknown:
                raise GuideError(f"{where}: unknown needs {unknown} (known: {sorted(NEEDS)})")
        elif key.strip() == "prelude" and not value:
            prelude = True
        else:
            raise GuideError(f"{where}: unknown step attribute {part!r} (needs: ..., prelude)")
    if prelude and mode is not Mode.RUN:
        raise GuideError(f"{where}: a prelude runs: it must be a run step")
    return mode, needs, prelude


def steps(path: Path) -> list[Step]:
    """Every step of one guide, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Step] = []
    section = ""
    pending: tuple[int, tuple[Mode, tuple[str, ...], bool]] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        where = f"{_shown(path)}:{i + 1}"
        fence = FENCE.match(line)
        if line.startswith("#") and not fence:
            section = line.lstrip("#").strip()
        marker = MARKER.match(line)
        if marker:
            pending = (i, _marker(marker.group("spec"), where))
        elif fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
            if end is None:
                raise GuideError(f"{where}: a code block that never closes")
            marked = pending is not None and pending[0] == i - 1
            if fence.group("lang") == "sh":
                if not marked or pending is None:
                    raise GuideError(
                        f"{where}: a ```sh block without a <!-- step: run|render --> line before it"
                    )
                mode, needs, prelude = pending[1]
                text = "\n".join(lines[i + 1 : end]) + "\n"
                out.append(Step(path, i + 1, len(out) + 1, section, mode, text, needs, prelude))
            elif marked:
                raise GuideError(
                    f"{where}: a step marker before a ```{fence.group('lang')} block (only sh runs)"
                )
            pending = None
            i = end
        elif line.strip() and pending is not None and pending[0] != i:
            raise GuideError(f"{where}: a step marker not followed by its ```sh block")
        i += 1
    return out


def all_steps() -> list[Step]:
    return [step for guide in GUIDES for step in steps(guide)]


def runnable(found: list[Step]) -> list[Step]:
    return [s for s in found if s.mode is Mode.RUN]


def render_only(found: list[Step]) -> list[Step]:
    return [s for s in found if s.mode is Mode.RENDER]


def prelude(found: list[Step]) -> str:
    """The text every step runs after: the prelude steps of the same guide, in order."""
    return "".join(s.text for s in found if s.prelude)
