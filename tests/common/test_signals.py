"""common/signals.py: a stop signal that arrives while the main thread holds the stop event's own lock
(inside ``stop.wait()``) still stops the command. Before, the estimator and the keeper set the event from
the handler itself, and such a signal left the process waiting on its own lock for ever (a unit run saw
the estimator ignore a SIGTERM sent just after it was ready)."""

from __future__ import annotations

import os
import signal
import threading

from webhook.common.signals import stop_on_signals


def test_a_signal_inside_the_events_own_lock_still_stops() -> None:
    stop = threading.Event()
    before = signal.getsignal(signal.SIGUSR1)
    try:
        stop_on_signals(stop, (signal.SIGUSR1,))
        with stop._cond:  # where Event.wait() stands when the signal comes (its lock held)
            os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs here, in this thread
            assert not stop.is_set()  # it could not be set while this thread holds the lock
        assert stop.wait(30), "the stop was lost"
    finally:
        signal.signal(signal.SIGUSR1, before)
