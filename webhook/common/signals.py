"""A long-running command stops on SIGTERM or SIGINT, without deadlocking its own main thread."""

from __future__ import annotations

import signal
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_on_signals(stop: threading.Event, signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> None:
    """Set ``stop`` when one of ``signals`` arrives. Python runs the handler in the main thread, which may
    be inside ``stop.wait()`` holding the event's own lock at that moment: ``stop.set()`` there waits for
    that lock for ever (the estimator once ignored a SIGTERM so). A thread of its own sets it."""

    def handler(*_: object) -> None:
        threading.Thread(target=stop.set, name="stop-on-signal", daemon=True).start()

    for sig in signals:
        signal.signal(sig, handler)
