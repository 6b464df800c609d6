"""Who the fencing agent's releases come from: the member role's own identity on its API server.

Only the agent starts a held job: the member webhook accepts the agent's release markers (``released``,
a hold removed, ``state: running``) only from the user the agent's requests are made as, and fails
closed wherever that user cannot be known: a marker from anyone is then kept held, with a warning.

The identity is, in this order: the users given with ``--agent-user`` (or ``$FLINK_FAILOVER_AGENT_USERS``);
else what the API server says the agent's own credentials are (a ``SelfSubjectReview``,
``authentication.k8s.io/v1``, GA since Kubernetes 1.28; any authenticated user may ask); else, in a pod
without ``--kubeconfig``, its service account token's subject. A review that fails is asked again at
most every ``RETRY_SECONDS``.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.kubeobjects import KubeObjects, Resource
from webhook.common.untyped import as_map

log = logging.getLogger(__name__)

SELF_SUBJECT_REVIEWS = Resource("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview")
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
RETRY_SECONDS = 30.0


@dataclass(frozen=True)
class Known:
    """The identity as far as it is known: ``users`` None means unknown (nobody's markers count)."""

    users: frozenset[str] | None
    source: str  # where it was learnt, or why it is unknown

    def accepts(self, user: str) -> bool:
        return self.users is not None and user in self.users


def review_self(objects: KubeObjects, timeout: float = 5.0) -> str | ApiFailure:
    """The username the API server authenticates these credentials as (a SelfSubjectReview)."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer = objects.create(SELF_SUBJECT_REVIEWS, None, body, timeout=timeout)
    if isinstance(answer, ApiFailure):
        return answer
    return username_of(answer) or ApiFailure(0, "the SelfSubjectReview carries no status.userInfo.username")


def username_of(review: Mapping[str, Any]) -> str:
    user = as_map(as_map(review.get("status")).get("userInfo")).get("username")
    return user if isinstance(user, str) else ""


def token_subject(token_file: Path = SERVICE_ACCOUNT_TOKEN) -> str:
    """``system:serviceaccount:<ns>:<name>`` from the pod's own token (its ``sub`` claim; the token is
    ours, so it is read, not verified), or "" outside a pod."""
    try:
        token = token_file.read_text(encoding="utf-8").strip()
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (OSError, IndexError, ValueError):
        return ""
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) else ""


class AgentIdentity:
    """``named``: the users given; ``review``: asks the API server (None: no client, e.g. offline);
    ``token``: the pod token's subject ("" outside a pod or with ``--kubeconfig``)."""

    def __init__(
        self,
        named: frozenset[str] = frozenset(),
        review: Callable[[], str | ApiFailure] | None = None,
        # the service account's name read from the pod's token (not a secret)
        token: str = "",  # nosec B107
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._named = named
        self._review = review
        self._token = token
        self._clock = clock
        self._lock = threading.Lock()
        self._known: Known | None = Known(named, "--agent-user") if named else None
        if self._known is None and review is None and token:
            self._known = Known(frozenset({token}), "the pod's service account token")
        self._asked = float("-inf")
        self._problem = "no --agent-user given, and no API server to ask (offline: review --agent-user)"

    @classmethod
    def fixed(cls, users: frozenset[str] | None) -> AgentIdentity:
        """A known set of users (tests, ``review --agent-user``), or unknown when None or empty."""
        return cls(users or frozenset())

    @classmethod
    def of_cluster(
        cls, named: frozenset[str], client: ClientConfig | None, in_pod_token: str
    ) -> AgentIdentity:
        """For the member role: ``client`` is the one its agent uses (its own cluster's API)."""
        if client is None:
            return cls(named, token=in_pod_token)

        def review() -> str | ApiFailure:
            objects = KubeObjects.connect(client, "member cluster")
            return objects if isinstance(objects, ApiFailure) else review_self(objects)

        return cls(named, review, in_pod_token)

    def current(self) -> Known:
        """What is known now, at once (an admission never waits for the API server): an unknown
        identity is asked for again on a thread of its own, at most every ``RETRY_SECONDS``."""
        with self._lock:
            if self._known is not None:
                return self._known
            due = self._review is not None and self._clock() - self._asked >= RETRY_SECONDS
            if due:
                self._asked = self._clock()
                threading.Thread(target=self._ask, name="agent-identity", daemon=True).start()
            return Known(None, self._problem)

    def learn(self) -> Known:
        """Ask now and wait for the answer (at start-up)."""
        with self._lock:
            if self._known is not None:
                return self._known
            self._asked = self._clock()
        self._ask()
        with self._lock:
            return self._known or Known(None, self._problem)

    def _ask(self) -> None:
        answer = self._review() if self._review is not None else None
        with self._lock:
            if isinstance(answer, str):
                self._known = Known(frozenset({answer}), "SelfSubjectReview")
            elif self._token:
                self._known = Known(frozenset({self._token}), "the pod's service account token")
            elif answer is not None:
                self._problem = f"SelfSubjectReview failed: {answer.message}"

    def announce(self) -> Known:
        """Learn it now and say so once (at start-up): an unknown identity is an error, since every
        release marker is then refused."""
        known = self.learn()
        if known.users is None:
            log.error(
                "the fencing agent's identity is unknown (%s): held jobs are released by no one until it "
                "is known; set --agent-user",
                known.source,
            )
        else:
            log.info("release markers accepted from %s (%s)", ", ".join(sorted(known.users)), known.source)
        return known
