"""A real job on a real Flink session cluster, submitted as its users submit one: a SQL ``INSERT`` (a
datagen source into a blackhole sink: nothing outside Flink) run by Flink's own Table API against the
cluster's REST endpoint (``execution.target: remote``), through pyflink's Java gateway. Flink's SQL
client needs the SQL gateway's jar, which the PyPI distribution lacks; pyflink's gateway needs only
py4j and ruamel.yaml beside it (``make flink-jm`` installs both).

The job needs no TaskManager to be listed RUNNING by ``/jobs/overview``: its tasks wait for slots
(``SLOT_WAIT``, given to the JobManager, keeps them waiting longer than any test)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.keeper import flink_env, flink_pythons

SLOT_WAIT = ["-D", "slot.request.timeout=1h"]

_SUBMIT = r"""
import sys
from pyflink.java_gateway import get_gateway
jvm = get_gateway().jvm
conf = jvm.org.apache.flink.configuration.Configuration()
for key, value in (("execution.target", "remote"), ("rest.address", "127.0.0.1"), ("rest.port", sys.argv[1])):
    conf.setString(key, value)
api = jvm.org.apache.flink.table.api
settings = api.EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build()
env = api.TableEnvironment.create(settings)
env.executeSql("CREATE TABLE s (n BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '1')")
env.executeSql("CREATE TABLE k (n BIGINT) WITH ('connector' = 'blackhole')")
print(env.executeSql("INSERT INTO k SELECT n FROM s").getJobClient().get().getJobID().toString(), flush=True)
"""


def submitter() -> str | None:
    """The Python of the first of ``FLINK_VENVS`` that can run pyflink's Java gateway."""
    found = flink_pythons("import py4j, ruamel.yaml, pyflink.java_gateway")
    return next((str(python) for python, _ in found), None)


def submit(python: str, home: Path, rest_port: int, timeout: float = 300.0) -> str:
    """Submit the job to the session cluster at ``rest_port``; its jobId (the gateway's JVM exits with the
    Python process, once the job is submitted)."""
    done = subprocess.run(
        [python, "-c", _SUBMIT, str(rest_port)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=flink_env(home),
    )
    lines = done.stdout.split()
    assert done.returncode == 0 and lines, f"submission failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return lines[-1]
