"""The Flink operator's kinds as resources of a member's API server (group, version, plural), named once
for every client that reads or patches them: the session-cluster lookup, the fencing agent, ``status``."""

from __future__ import annotations

from webhook.common.flink import BLUE_GREEN, GROUP
from webhook.common.kubeobjects import Resource

VERSION = "v1beta1"
PLURALS = {
    "FlinkDeployment": "flinkdeployments",
    "FlinkSessionJob": "flinksessionjobs",
    BLUE_GREEN: "flinkbluegreendeployments",
}
RESOURCES = {kind: Resource(GROUP, VERSION, plural, kind) for kind, plural in PLURALS.items()}
DEPLOYMENTS = RESOURCES["FlinkDeployment"]
# A blue/green child's parent: its hold holds the child (restore/updates.py keep_child_held).
BLUE_GREENS = RESOURCES[BLUE_GREEN]
