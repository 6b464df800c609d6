"""Validate a rendered manifest: built-in kinds against the Kubernetes OpenAPI schemas shipped by
kubernetes-validate (strict: unknown fields are errors); CRD kinds (cert-manager, Prometheus operator),
which it has no schema for, against the minimal shape below."""

from __future__ import annotations

import functools
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils as kv_utils

# kubernetes-validate re-reads the (large) definitions file for every document: read each file once.
if not hasattr(kv_utils.schema_contents, "cache_info"):
    kv_utils.schema_contents = functools.lru_cache(maxsize=None)(kv_utils.schema_contents)

# The newest Kubernetes the installed kubernetes-validate ships schemas for (1.30+ is needed for
# ValidatingAdmissionPolicy v1 and webhook matchConditions).
MIN_VERSION = (1, 30)

_NAMED = {
    "type": "object",
    "required": ["name", "namespace"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "namespace": {"type": "string", "minLength": 1},
    },
}
_ISSUER_REF = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "kind": {"enum": ["Issuer", "ClusterIssuer"]},
        "group": {"type": "string"},
    },
}
_DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$"}

# Only the fields this chart uses, from the cert-manager v1 and monitoring.coreos.com v1 CRDs.
CRD_SHAPES: dict[tuple[str, str], dict[str, Any]] = {
    ("cert-manager.io/v1", "Issuer"): {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": False,
                "properties": {
                    "selfSigned": {"type": "object"},
                    "ca": {
                        "type": "object",
                        "required": ["secretName"],
                        "additionalProperties": False,
                        "properties": {"secretName": {"type": "string", "minLength": 1}},
                    },
                },
            }
        },
    },
    ("cert-manager.io/v1", "Certificate"): {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["secretName", "issuerRef"],
                "additionalProperties": False,
                "properties": {
                    "secretName": {"type": "string", "minLength": 1},
                    "isCA": {"type": "boolean"},
                    "commonName": {"type": "string", "maxLength": 64},
                    "dnsNames": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "duration": _DURATION,
                    "renewBefore": _DURATION,
                    "usages": {
                        "type": "array",
                        "items": {
                            "enum": [
                                "server auth",
                                "client auth",
                                "digital signature",
                                "key encipherment",
                                "cert sign",
                            ]
                        },
                    },
                    "privateKey": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                            "size": {"type": "integer"},
                            "rotationPolicy": {"enum": ["Never", "Always"]},
                        },
                    },
                    "issuerRef": _ISSUER_REF,
                },
            }
        },
    },
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["selector", "endpoints"],
                "additionalProperties": False,
                "properties": {
                    "selector": {"type": "object"},
                    "namespaceSelector": {"type": "object"},
                    "endpoints": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "port": {"type": "string"},
                                "scheme": {"enum": ["http", "https"]},
                                "path": {"type": "string"},
                                "interval": {"type": "string", "pattern": r"^[0-9]+(ms|s|m|h)$"},
                                "tlsConfig": {"type": "object"},
                            },
                        },
                    },
                },
            }
        },
    },
    ("monitoring.coreos.com/v1", "PrometheusRule"): {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["groups"],
                "additionalProperties": False,
                "properties": {
                    "groups": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["name", "rules"],
                            "additionalProperties": False,
                            "properties": {
                                "name": {"type": "string", "minLength": 1},
                                "rules": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["alert", "expr"],
                                        "additionalProperties": False,
                                        "properties": {
                                            "alert": {
                                                "type": "string",
                                                "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                                            },
                                            "expr": {"type": "string", "minLength": 1},
                                            "for": {"type": "string", "pattern": r"^[0-9]+(ms|s|m|h)$"},
                                            "labels": {
                                                "type": "object",
                                                "additionalProperties": {"type": "string"},
                                            },
                                            "annotations": {
                                                "type": "object",
                                                "additionalProperties": {"type": "string"},
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    }
                },
            }
        },
    },
}


def kubernetes_version() -> str:
    version = kv_utils.latest_version()
    major, minor = (int(x) for x in version.split(".")[:2])
    assert (major, minor) >= MIN_VERSION, f"kubernetes-validate ships schemas up to {version} only"
    return version


def validate(doc: dict[str, Any]) -> None:
    key = (doc.get("apiVersion", ""), doc.get("kind", ""))
    if key in CRD_SHAPES:
        jsonschema.validate(doc["metadata"], _NAMED)
        jsonschema.validate(doc, CRD_SHAPES[key])
        return
    try:
        kubernetes_validate.validate(doc, kubernetes_version(), strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        raise AssertionError(f"{doc['kind']}/{doc['metadata']['name']}: {path}: {exc.message}") from None
