"""The fencing agent driven one pass at a time, for the step-by-step tests (test_fencing_agent.py).

``Driver.tick`` is one poll (the heartbeat loop running beside it) and one more pass of the heartbeat
loop, everything they started waited for to the end, on an
event loop of the driver's own whose clock moves one poll forward before each tick: each tick is "the
next poll" to the agent (its renewals fall due, its renew deadline counts), however fast the test runs.
The whole agent loop (``FencingAgent.run``) is what ``tests/support/simulation.py`` drives.
"""

from __future__ import annotations

import asyncio
import copy
import selectors
import time
from collections.abc import Callable
from typing import Any

from tests.controlplane.fakeapi import Refused
from tests.support.objects import apply, decode_patch, review
from webhook.common.admission import parse_review
from webhook.fencing.agent import FencingAgent
from webhook.fencing.report import Step


class SteppedLoop(asyncio.SelectorEventLoop):
    """Real time plus an offset the driver moves."""

    def __init__(self) -> None:
        super().__init__(selectors.DefaultSelector())
        self.offset = 0.0

    def time(self) -> float:
        return time.monotonic() + self.offset


class Driver:
    def __init__(self, agent: FencingAgent) -> None:
        self.agent = agent
        self.loop = SteppedLoop()

    def tick(self, advance: float | None = None) -> list[Step]:
        """One poll, then one pass of the heartbeat loop (renewals due, step-downs), all waited for."""
        self.loop.offset += self.agent.policy.fencing.poll_seconds if advance is None else advance
        return self.loop.run_until_complete(self._tick())

    async def _tick(self) -> list[Step]:
        # The heartbeat loop runs beside the poll, as in ``FencingAgent.run``, then once more after it.
        stop = asyncio.Event()
        beside = asyncio.ensure_future(self.agent.renewer.run(stop))
        steps = await self.agent.poll()
        stop.set()
        await beside
        self.agent.renewer.tick()
        await self.agent.settle()
        return steps

    def renew(self, advance: float = 0.0) -> None:
        """One pass of the heartbeat loop alone, ``advance`` seconds later."""
        self.loop.offset += advance

        async def once() -> None:
            self.agent.renewer.tick()
            await self.agent.settle()

        self.loop.run_until_complete(once())

    def recheck(self) -> list[Step]:
        async def once() -> list[Step]:
            steps = await self.agent.recheck()
            await self.agent.settle()
            return steps

        return self.loop.run_until_complete(once())

    def close(self) -> None:
        self.agent.close()
        self.loop.close()


def admitting(
    handler: Callable[[Any], Any],
) -> Callable[[dict[str, Any], dict[str, Any], str], dict[str, Any]]:
    """A fake API server's ``admit`` hook running ``handler`` (a member webhook) on every PATCH, as the
    real API server calls the mutating webhook on the UPDATE a patch makes."""

    def admit(old: dict[str, Any], new: dict[str, Any], user: str) -> dict[str, Any]:
        request = parse_review(review(copy.deepcopy(new), operation="UPDATE", old=old, user=user))
        response = handler(request).to_review()["response"]
        if not response["allowed"]:
            raise Refused(str((response.get("status") or {}).get("message") or "denied"))
        return apply(new, decode_patch(response))

    return admit


class PatchesOnly:
    """The agent's MemberApi (coroutines) for a test of one executor: lists and finds nothing, answers
    each patch with its body and keeps it (``patched``)."""

    def __init__(self) -> None:
        self.patched: list[Any] = []

    async def list_kind(self, kind: str, timeout: float | None = None) -> list[Any]:
        return []

    async def get(self, kind: str, namespace: str, name: str, timeout: float | None = None) -> None:
        return None

    async def patch(
        self, kind: str, namespace: str, name: str, body: Any, timeout: float | None = None
    ) -> Any:
        self.patched.append(body)
        return body
