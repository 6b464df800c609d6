"""What a role hands the server: its admission endpoints, its readiness, any extra routes.

Kept apart from the Flask app so that the composition root (``webhook.roles``) and the offline
``review`` command can describe endpoints without importing a web framework.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webhook.common.admission import Handler
from webhook.common.admission import OnError as OnError  # re-exported: the roles and review name it here

if TYPE_CHECKING:
    from flask import Blueprint

# kube-apiserver's own request limit. An UPDATE's review carries two objects, each at most etcd's 1.5 MiB
# default request size, so the largest review a cluster can send still fits.
MAX_BODY_BYTES = 3 * 1024 * 1024

Ready = Callable[[], str | None]  # None when ready, else the reason


@dataclass
class Endpoint:
    """One admission route: its handler and what an unexpected failure answers for that role."""

    path: str
    role: str  # a label for logs and metrics; the server attaches no meaning to it
    handler: Handler
    on_error: OnError


@dataclass
class ServerConfig:
    endpoints: list[Endpoint]
    ready: Ready
    notes: tuple[str, ...] = ()  # shown under "ready" on /readyz: what works, but not everywhere
    blueprints: Iterable[Blueprint] = field(default_factory=tuple)
    max_body_bytes: int = MAX_BODY_BYTES
