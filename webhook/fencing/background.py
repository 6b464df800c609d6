"""Tasks a fencing loop starts and does not wait for: a heartbeat's renewal, a gone copy's removal, a
running job's precheck. Kept until they end (the event loop holds only weak references to its tasks),
waited for by tests that drive one pass at a time, cancelled when the agent stops."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


class Background:
    """The tasks one owner started and has not seen end."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Awaitable[T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def settle(self) -> None:
        """Wait for what was started before this call."""
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
