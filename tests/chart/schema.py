"""Everything generated from the server's policy declaration (``webhook/policy/restore.py`` ``POLICY``),
and the chart's values.schema.json: its restore policy part from the declaration, every role's pod
settings from one definition here. Beside it the storage options each backend takes
(templates/_storage-options.tpl), which the chart checks names against at install with the server's "did
you mean" (a JSON schema can only list all thirty names), the rules between policy fields as template
checks (templates/_policy-rules.tpl, ``tests/chart/policy_rules.py``) and the docs' policy tables
(README.md, docs/failover.md: ``tests/support/policy_tables.py``).

    python -m tests.chart.schema            # rewrite them all (make chart-schema)
    python -m tests.chart.schema --check    # exit 1 when a committed file differs

tests/chart/test_schema.py fails when the committed files are not what this module generates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.chart.policy_rules import render_rules
from tests.support import policy_tables
from webhook.common.paths import FSSPEC_PROTOCOL
from webhook.member.keeper import Sidecars
from webhook.policy.backend_options import STORAGE_OPTIONS
from webhook.policy.restore import KNOWN_SCHEMES, MAX_DEADLINE_SECONDS, json_schema

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "charts" / "flink-failover" / "values.schema.json"
OPTIONS_PATH = SCHEMA_PATH.parent / "templates" / "_storage-options.tpl"
RULES_PATH = SCHEMA_PATH.parent / "templates" / "_policy-rules.tpl"

Schema = dict[str, Any]


def obj(properties: Schema, required: list[str] | None = None) -> Schema:
    """A closed object: unknown keys are typos, and a typo must fail the install."""
    out: Schema = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = required
    return out


STRING_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
QUANTITY: Schema = {
    "anyOf": [
        {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$"},
        {"type": "number", "minimum": 0},
    ]
}
DNS_LABEL: Schema = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
DNS_SUBDOMAIN: Schema = {
    "type": "string",
    "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    "maxLength": 253,
}
ENV_NAME: Schema = {"type": "string", "pattern": r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"}
PORT: Schema = {"type": "integer", "minimum": 1, "maximum": 65535}
SECRET_NAME: Schema = {"anyOf": [{"const": ""}, DNS_SUBDOMAIN]}
SECRET_KEY: Schema = {"type": "string", "pattern": r"^[-._a-zA-Z0-9]+$"}


def webhook_registration(ca_hint: str) -> Schema:
    return obj(
        {
            "failurePolicy": {"type": "string", "enum": ["Fail", "Ignore"]},
            "timeoutSeconds": {"type": ["integer", "null"], "minimum": 1, "maximum": 30},
            "timeoutMarginSeconds": {"type": "integer", "minimum": 1, "maximum": 29},
            "excludeNamespaces": {"type": "array", "items": DNS_LABEL, "uniqueItems": True},
            "caBundle": {"type": "string", "pattern": "^[A-Za-z0-9+/=]*$", "description": ca_hint},
        }
    )


def webhook_server() -> Schema:
    """The webhook roles' server (gunicorn behind TLS): member, controlPlane."""
    return {
        "workers": {"type": "integer", "minimum": 1, "maximum": 64},
        "threads": {"type": "integer", "minimum": 1, "maximum": 256},
        "containerPort": {"type": "integer", "minimum": 1024, "maximum": 65535},
        "probePort": {"type": "integer", "minimum": 1024, "maximum": 65535},
        # for the API server calling a webhook pod on a custom CNI; the estimator's caller is a pod
        "hostNetwork": {"type": "boolean"},
    }


def pod_settings() -> Schema:
    """What every role's Deployment takes (member, controlPlane, estimator: templates/_helpers.tpl
    ff.podPlacement and the role's deployment.yaml)."""
    return {
        "replicaCount": {"type": "integer", "minimum": 1},
        "resources": obj(
            {
                "requests": {"type": "object", "additionalProperties": QUANTITY},
                "limits": {"type": "object", "additionalProperties": QUANTITY},
            }
        ),
        "podAnnotations": STRING_MAP,
        "podLabels": STRING_MAP,
        "nodeSelector": STRING_MAP,
        "tolerations": {"type": "array", "items": {"type": "object"}},
        "affinity": {"type": "object"},
        "priorityClassName": {"anyOf": [{"const": ""}, DNS_SUBDOMAIN]},
        "topologySpread": obj(
            {
                "maxSkew": {"type": "integer", "minimum": 1},
                "whenUnsatisfiable": {"type": "string", "enum": ["DoNotSchedule", "ScheduleAnyway"]},
            }
        ),
        "podDisruptionBudget": obj(
            {
                "enabled": {"type": "boolean"},
                "minAvailable": {
                    "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[0-9]+%$"}]
                },
            }
        ),
        "extraEnv": {
            "type": "array",
            "items": {"type": "object", "required": ["name"], "properties": {"name": ENV_NAME}},
        },
        "serviceAccount": obj(
            {
                "create": {"type": "boolean"},
                "name": {"anyOf": [{"const": ""}, DNS_SUBDOMAIN]},
                "annotations": STRING_MAP,
            }
        ),
        # the rest of a Volume / VolumeMount is checked against the Kubernetes schema by the tests
        "extraVolumes": {
            "type": "array",
            "items": {"type": "object", "required": ["name"], "properties": {"name": DNS_LABEL}},
        },
        "extraVolumeMounts": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "mountPath"],
                "properties": {"name": DNS_LABEL, "mountPath": {"type": "string", "pattern": "^/"}},
            },
        },
    }


def estimator() -> Schema:
    """role estimator: Karmada's scheduler-estimator for one member cluster. The Service name
    <servicePrefix>-<cluster> must stay a DNS label (the template refuses more than 63 characters)."""
    # Karmada's cluster names: DNS labels of at most 48 characters; empty until role estimator is set
    # (the template then says the cluster is required).
    cluster = {"anyOf": [{"const": ""}, {**DNS_LABEL, "maxLength": 48}]}
    return obj(
        {
            "cluster": cluster,
            "kubeconfigSecret": SECRET_NAME,
            "kubeconfigKey": SECRET_KEY,
            "servicePrefix": {**DNS_LABEL, "maxLength": 48},
            "port": PORT,
            "metricsPort": PORT,
            "serviceType": {"type": "string", "enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
            "grpcWorkers": {"type": "integer", "minimum": 1, "maximum": 256},
            "stateRefreshSeconds": {"type": "number", "minimum": 0, "maximum": 60},
            "tls": obj(
                {
                    "secretName": SECRET_NAME,
                    "clientCAKey": {"anyOf": [{"const": ""}, SECRET_KEY]},
                }
            ),
            "externalName": {"anyOf": [{"const": ""}, DNS_SUBDOMAIN]},
            "externalPort": {"type": "integer", "minimum": 0, "maximum": 65535},
            **pod_settings(),
        }
    )


def values_schema() -> Schema:
    policy = json_schema()
    # Option names are checked by the chart's template (ff.checkStorageOptions: the server's message and
    # hint); a propertyNames enum here would stop helm first with the whole list "at ''".
    for scheme in policy["properties"]["storageOptions"]["properties"].values():
        del scheme["propertyNames"]
    # The webhook's timeoutSeconds (at most 30) must stay above the deadline: strictly below 30 here.
    deadline = policy["properties"]["deadlineSeconds"]
    del deadline["maximum"]
    deadline["exclusiveMaximum"] = MAX_DEADLINE_SECONDS
    member = obj(
        {
            **pod_settings(),
            **webhook_server(),
            "webhook": webhook_registration("base64 PEM, when nothing injects the CA"),
            "validatingAdmissionPolicy": obj({"enabled": {"type": "boolean"}}),
            "requireStorageBackends": {"type": "boolean"},
            # Read a FlinkSessionJob's session cluster (token + get flinkdeployments) without fencing.
            "readSessionClusters": {"type": "boolean"},
            # Events of the restore decisions (token + create/patch events) without fencing.
            "events": {"type": "boolean"},
            # The member's name in Karmada (a DNS subdomain); empty: no fencing agent.
            "fencing": obj(
                {
                    "cluster": {
                        "type": "string",
                        "pattern": "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$",
                        "maxLength": 253,
                    }
                }
            ),
            # Whether the member serves native sidecars (the keeper is one): serve --native-sidecars.
            "keeper": obj({"nativeSidecars": {"type": "string", "enum": [s.value for s in Sidecars]}}),
        }
    )
    # controlPlane.part workload without kubeconfigSecret would use the host cluster's credentials: refused
    # here as well as by the template (helm template --set skips neither).
    needs_kubeconfig: Schema = {
        "if": {"properties": {"part": {"const": "workload"}}, "required": ["part"]},
        "then": {"properties": {"kubeconfigSecret": {"minLength": 1}}, "required": ["kubeconfigSecret"]},
    }
    control_plane = obj(
        {
            "part": {"type": "string", "enum": ["all", "workload", "registration"]},
            "kubeconfigSecret": SECRET_NAME,
            "kubeconfigKey": {"type": "string", "minLength": 1},
            "capture": {"type": "boolean"},
            "webhookURL": {"type": "string", "pattern": "^(https://.+)?$"},
            "rbacSubjects": {
                "type": "array",
                "items": obj(
                    {
                        "kind": {"type": "string", "enum": ["User", "Group", "ServiceAccount"]},
                        "name": {"type": "string", "minLength": 1},
                        "namespace": {"type": "string"},
                        "apiGroup": {"type": "string"},
                    },
                    ["kind", "name"],
                ),
            },
            "leaderElection": obj(
                {
                    "enabled": {"type": "boolean"},
                    "leaseName": {"anyOf": [{"const": ""}, DNS_SUBDOMAIN]},
                    "leaseDurationSeconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
                    "renewDeadlineSeconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
                    "retryPeriodSeconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
                }
            ),
            **pod_settings(),
            **webhook_server(),
            "webhook": webhook_registration(
                "base64 PEM, e.g. for a registration on a remote Karmada API server"
            ),
        }
    )
    control_plane.update(needs_kubeconfig)
    # With fencing (ff.memberFencing: role member, member.fencing.cluster, policy.fencing.enabled) a held job
    # stays held only while the webhook answers: failurePolicy Ignore would let every held object through
    # while it is down. Refused here, by the template (--skip-schema-validation) and by the server.
    fencing_needs_fail: Schema = {
        "if": {
            "properties": {
                "role": {"const": "member"},
                "member": {
                    "properties": {
                        "fencing": {"properties": {"cluster": {"minLength": 1}}, "required": ["cluster"]}
                    },
                    "required": ["fencing"],
                },
                "policy": {
                    "properties": {
                        "fencing": {"properties": {"enabled": {"const": True}}, "required": ["enabled"]}
                    },
                    "required": ["fencing"],
                },
            },
            "required": ["role", "member", "policy"],
        },
        "then": {
            "properties": {
                "member": {"properties": {"webhook": {"properties": {"failurePolicy": {"const": "Fail"}}}}}
            }
        },
    }
    duration = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$"}
    certificates = obj(
        {
            "mode": {"type": "string", "enum": ["self-managed", "cert-manager"]},
            "days": {"type": "integer", "minimum": 1},
            "caDays": {"type": "integer", "minimum": 1},
            "renewBeforeDays": {"type": "integer", "minimum": 0},
            "renewSchedule": {"type": "string", "minLength": 9},
            "extraSANs": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
            "certManager": obj(
                {
                    "issuerRef": obj(
                        {
                            "name": {"type": "string"},
                            "kind": {"type": "string", "enum": ["Issuer", "ClusterIssuer"]},
                            "group": {"type": "string"},
                        }
                    ),
                    "duration": duration,
                    "renewBefore": duration,
                }
            ),
        }
    )
    properties: Schema = {
        "role": {"type": "string", "enum": ["member", "control-plane", "estimator"]},
        "nameOverride": {"type": "string", "maxLength": 40},
        "fullnameOverride": {"type": "string", "maxLength": 50},
        "image": obj(
            {
                # empty by default: the template requires it, naming how to build and push the image
                "repository": {"type": "string"},
                "tag": {"type": "string"},
                "digest": {"type": "string", "pattern": "^(sha256:[a-f0-9]{64})?$"},
                "pullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]},
            },
            ["repository"],
        ),
        "imagePullSecrets": {
            "type": "array",
            "items": obj({"name": {"type": "string", "minLength": 1}}, ["name"]),
        },
        "logLevel": {"type": "string", "enum": ["debug", "info", "warning", "error", "critical"]},
        # replaced whole when not empty; the rest is checked against the Kubernetes schema by the tests
        "podSecurityContext": {"type": "object"},
        "containerSecurityContext": {"type": "object"},
        "policy": policy,
        "member": member,
        "controlPlane": control_plane,
        "estimator": estimator(),
        "certificates": certificates,
        "service": obj({"port": PORT}),
        "networkPolicy": obj(
            {"enabled": {"type": "boolean"}, "from": {"type": "array", "items": {"type": "object"}}}
        ),
        "metrics": obj(
            {
                "serviceMonitor": obj(
                    {
                        "enabled": {"type": "boolean"},
                        "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                        "labels": STRING_MAP,
                    }
                ),
                "prometheusRule": obj(
                    {
                        "enabled": {"type": "boolean"},
                        "labels": STRING_MAP,
                        "for": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                        "fencing": obj(
                            {
                                "heldSeconds": {"type": "integer", "minimum": 1},
                                "waitingForOperatorFor": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                            }
                        ),
                    }
                ),
            }
        ),
    }
    return {
        "$schema": "https://json-schema.org/draft-07/schema#",
        "title": "flink-failover chart values (generated by tests/chart/schema.py, do not edit)",
        **obj(properties),
        **fencing_needs_fail,
    }


def require_defaults(schema: Schema, defaults: Any) -> Schema:
    """Every key values.yaml sets (to something other than null) is required.

    A user's ``key: ~`` deletes the key in Helm; without this the templates would dereference nil (a
    Go panic in ``helm template``) or the ConfigMap would silently fall back to another default.
    """
    if isinstance(defaults, dict) and "properties" in schema:
        present = [k for k, v in defaults.items() if v is not None and k in schema["properties"]]
        if present:
            schema["required"] = sorted(set(schema.get("required", [])) | set(present))
        for key, value in defaults.items():
            if key in schema["properties"]:
                require_defaults(schema["properties"][key], value)
    return schema


def render() -> str:
    defaults = yaml.safe_load((SCHEMA_PATH.parent / "values.yaml").read_text(encoding="utf-8"))
    return json.dumps(require_defaults(values_schema(), defaults), indent=2) + "\n"


def render_options() -> str:
    """The storage options of each scheme's backend, for the chart's install check."""
    table = {
        s: {"backend": FSSPEC_PROTOCOL[s], "options": list(STORAGE_OPTIONS[FSSPEC_PROTOCOL[s]])}
        for s in KNOWN_SCHEMES
    }
    return (
        "{{- /* Generated by tests/chart/schema.py from the server's policy model "
        "(webhook/policy/backend_options.py STORAGE_OPTIONS): do not edit. */ -}}\n"
        '{{- define "ff.storageOptionNames" -}}\n'
        + json.dumps(table, separators=(",", ":"))
        + "\n{{- end -}}\n"
    )


def generated() -> dict[Path, str]:
    """Every file this module writes, with what it writes."""
    return {
        SCHEMA_PATH: render(),
        OPTIONS_PATH: render_options(),
        RULES_PATH: render_rules(),
        **policy_tables.rendered(),
    }


def main(argv: list[str]) -> int:
    files = generated()
    if "--check" in argv:
        stale = [path for path, text in files.items() if path.read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"{path} is not the generated file: run python -m tests.chart.schema", file=sys.stderr)
        return 1 if stale else 0
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
