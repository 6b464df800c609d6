"""Where an admission's CPU goes, in every thread it uses (``bench verdicts --profile``).

cProfile follows one thread; an admission runs in the calling thread, the lookup's request and
branch pools and fsspec's event loop. ``install`` (before any of them starts) gives every thread
started from then on a profiler of its own, counting that thread's CPU time (``time.thread_time``);
``clear`` forgets what they counted (between idle admissions), ``report`` merges them.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import threading
import time
from typing import Any


class _Snapshot:
    """What ``pstats.Stats`` loads: a profiler's stats, without disabling it (only its own thread may)."""

    def __init__(self, profile: cProfile.Profile) -> None:
        profile.snapshot_stats()
        self.stats = profile.stats

    def create_stats(self) -> None:
        pass


class ThreadProfiles:
    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _new(self) -> cProfile.Profile:
        profile = cProfile.Profile(time.thread_time)
        with self._lock:
            self.profiles.append(profile)
        profile.enable()
        return profile

    def install(self) -> None:
        original = threading.Thread.run
        profiles = self

        def run(thread: threading.Thread) -> None:
            profile = profiles._new()
            try:
                original(thread)
            finally:
                profile.disable()

        threading.Thread.run = run  # type: ignore[method-assign,assignment]
        self._new()  # this thread's

    def clear(self) -> None:
        with self._lock:
            for profile in self.profiles:
                profile.clear()

    def report(self, title: str, admissions: int, lines: int = 25) -> str:
        with self._lock:
            snapshots: list[Any] = [_Snapshot(p) for p in self.profiles]
        snapshots = [s for s in snapshots if s.stats]  # pstats loads none that is empty
        stats = pstats.Stats(snapshots[0])
        for snapshot in snapshots[1:]:
            stats.add(snapshot)
        stats.strip_dirs()
        out = io.StringIO()
        stats.stream = out  # type: ignore[attr-defined]
        total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
        out.write(
            f"\n### {title}: CPU of every thread, {admissions} admissions, "
            f"{total / admissions * 1000:.0f} ms each under the profiler\n"
        )
        stats.sort_stats("tottime").print_stats(lines)
        stats.sort_stats("cumulative").print_stats(lines)
        return out.getvalue()
