"""An Event sink that keeps what it is given, for tests of the agent's and the webhook's Events."""

from __future__ import annotations

from webhook.common.events import Occurrence


class Collected:
    """Keeps what was recorded, for tests of the pure callers."""

    def __init__(self) -> None:
        self.occurrences: list[Occurrence] = []

    def record(self, occurrence: Occurrence) -> None:
        self.occurrences.append(occurrence)

    def reasons(self) -> list[str]:
        return [o.reason for o in self.occurrences]
