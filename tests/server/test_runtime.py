"""The served worker is tuned for a burst's tail (``webhook/server/runtime.py``, measured in
``bench/workburst.py``): a short GIL switch interval and the start-up heap frozen out of the collector."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_a_tuned_worker_switches_fast_and_leaves_its_startup_heap_to_the_collector_no_more() -> None:
    code = textwrap.dedent(
        """
        import gc, json, sys
        import webhook.server.run  # what a worker has loaded before its endpoints are built
        before = (sys.getswitchinterval(), gc.get_freeze_count())
        from webhook.server.runtime import SWITCH_INTERVAL, tune_worker
        tune_worker()
        garbage = [[] for _ in range(3)]
        for item in garbage:
            item.append(item)  # cycles made after the freeze are still collected
        del garbage, item
        print(json.dumps({"before": before, "after": [sys.getswitchinterval(), gc.get_freeze_count()],
                          "wanted": SWITCH_INTERVAL, "collected": gc.collect()}))
        """
    )
    out = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True).stdout
    )
    assert out["before"] == [0.005, 0]  # the interpreter's defaults
    interval, frozen = out["after"]
    assert abs(interval - out["wanted"]) < 1e-9 and out["wanted"] < 0.005
    assert frozen > 10_000  # the modules, the Kubernetes client's classes, ...
    assert out["collected"] >= 3


def test_every_worker_is_tuned_once_its_endpoints_are_built() -> None:
    import inspect

    from webhook.server import run

    source = inspect.getsource(run.app_factory)
    assert source.index("create_app(config)") < source.index("tune_worker()")
