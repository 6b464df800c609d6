"""Which policy file a command reads (``--policy``, ``$FLINK_FAILOVER_POLICY``, the shipped default), reading
it, and what a valid policy probably gets wrong. Loaded once at start-up by every command and role through
``load``; an invalid file stops the process with a message naming the field (``restore.py``
``policy_from_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import yaml

from webhook.common.contract import JOB_ID
from webhook.policy.restore import PolicyError, RestorePolicy, policy_from_dict

DEFAULT_POLICY_FILE = Path(str(files("webhook").joinpath("restore-policy.yaml")))
POLICY_ENV = "FLINK_FAILOVER_POLICY"


def policy_notes(policy: RestorePolicy) -> tuple[str, ...]:
    """What a valid policy probably gets wrong, told at start-up and by ``review`` (not refused: a
    policy may rely on Karmada's own state preservation alone)."""
    own = policy.key(JOB_ID)
    if own in policy.job_id_labels:
        return ()
    return (
        f"jobIdLabels does not include {own}, the label flink-failover's control plane writes: every "
        f"failover it relocates will find no jobId (searched: {', '.join(policy.job_id_labels)}); add it "
        "unless Karmada's own state preservation writes one of these labels",
    )


@dataclass(frozen=True)
class PolicySource:
    """Which policy file a command uses, and why (told to the user: a surprise here hides every decision)."""

    path: Path
    origin: str  # "--policy", "$FLINK_FAILOVER_POLICY" or "built-in default"

    def describe(self) -> str:
        return f"{self.path} ({self.origin})"


def policy_source(explicit: str | None, environ: Mapping[str, str]) -> PolicySource:
    """--policy wins, then $FLINK_FAILOVER_POLICY, then the default shipped in the package."""
    if explicit:
        return PolicySource(Path(explicit), "--policy")
    if environ.get(POLICY_ENV):
        return PolicySource(Path(environ[POLICY_ENV]), f"${POLICY_ENV}")
    return PolicySource(DEFAULT_POLICY_FILE, "built-in default")


def load_policy(path: str | Path) -> RestorePolicy:
    from webhook.common.documents import DocumentError, read_text

    try:
        text = read_text(path)  # a policy saved as UTF-16 (PowerShell) or with a BOM reads as well
    except DocumentError as exc:
        raise PolicyError("<file>", str(exc)) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError("<file>", f"{path} is not valid YAML: {exc}") from None
    # An empty file (or one of comments only) sets no field: every field is optional, so it is the
    # defaults, as an empty ``policy:`` block of the chart is.
    return policy_from_dict({} if doc is None else doc)


@dataclass(frozen=True)
class LoadedPolicy:
    """A usable policy, the file it came from and what it probably gets wrong (each command tells these)."""

    policy: RestorePolicy
    source: PolicySource
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Unusable:
    """A policy file that cannot be used, and why; the command says it and exits 2."""

    source: PolicySource
    error: PolicyError

    def message(self) -> str:
        return f"policy {self.source.describe()}: {self.error}"


def load(explicit: str | None, environ: Mapping[str, str]) -> LoadedPolicy | Unusable:
    """The policy a command uses: ``--policy`` (``explicit``), else the environment, else the default."""
    source = policy_source(explicit, environ)
    try:
        policy = load_policy(source.path)
    except PolicyError as exc:
        return Unusable(source, exc)
    return LoadedPolicy(policy, source, policy_notes(policy))
