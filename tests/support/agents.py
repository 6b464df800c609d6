"""The fencing agent driven one pass at a time, for the step-by-step tests (tests/fencing/test_agent.py).

``Driver.tick`` is one poll (the heartbeat loop running beside it) and one more pass of the heartbeat
loop, everything they started waited for to the end, on an
event loop of the driver's own whose clock moves one poll forward before each tick: each tick is "the
next poll" to the agent (its renewals fall due, its renew deadline counts), however fast the test runs.
And however slow: on that clock real time runs ``SLOWER`` times slower, so the agent's own deadlines (a
poll's wait for its copies, an API or storage call's) are missed only by work ``SLOWER`` times slower
than they allow. Measured under a load average of 13-16 on two cores: a poll's step on moto took over
its 5 s poll, and the tick said "pending" (or the heartbeat missed its renewal) where the test expected
the plan's action. Give the agent ``SteppedLoop.lanes`` for its storage calls to count on that clock too.
The whole agent loop (``FencingAgent.run``) is what ``tests/support/simulation.py`` drives.
"""

from __future__ import annotations

import asyncio
import copy
import selectors
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from tests.controlplane.fakeapi import Refused
from tests.support.objects import apply, decode_patch, review
from webhook.common.admission import parse_review
from webhook.fencing.agent import FencingAgent
from webhook.fencing.lanes import Call, Lanes
from webhook.fencing.report import Step

SLOWER = 10.0  # real seconds per second of a driven agent's clock
T = TypeVar("T")


class SteppedLoop(asyncio.SelectorEventLoop):
    """Real time, ``SLOWER`` times slower, plus an offset the driver moves (the ticks move time)."""

    def __init__(self) -> None:
        super().__init__(selectors.DefaultSelector())
        self.offset = 0.0
        self._started = time.monotonic()

    def time(self) -> float:
        return self._started + (time.monotonic() - self._started) / SLOWER + self.offset

    def lanes(self, timeout: float) -> Lanes:
        """Storage lanes whose deadlines count on this clock (a thread may read it: it only reads)."""
        return SlowedLanes(timeout, clock=self.time)


class SlowedLanes(Lanes):
    """Lanes on a ``SteppedLoop``'s clock, for the agent's calls (``run``): a call is handed its seconds
    left (its storage client's own timeout) in real seconds, ``SLOWER`` times the clock's."""

    async def run(self, call: Call[T], timeout: float | None = None) -> T:
        return await super().run(_real(call), timeout)


def _real(call: Call[T]) -> Call[T]:
    fn = call.fn
    return replace(call, fn=lambda left: fn(left * SLOWER))


class Driver:
    def __init__(self, agent: FencingAgent, loop: SteppedLoop | None = None) -> None:
        """``loop``: the one whose ``lanes`` the agent was given, if it was."""
        self.agent = agent
        self.loop = loop or SteppedLoop()

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
