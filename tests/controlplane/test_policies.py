"""policies/karmada/: valid against the Karmada CRDs, and saying what the docs say they say."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.controlplane import support as s
from tests.support.karmada_lua import karmada_lua
from tests.support.karmada_results import ENTRY_POINTS, convert
from webhook.controlplane.serve import WORK_PATH
from webhook.policy.restore import RestorePolicy

pytestmark = pytest.mark.shared

POLICIES = REPO / "policies" / "karmada"
CRD_FOR_KIND = {
    "PropagationPolicy": ("policy.karmada.io_propagationpolicies.yaml", "v1alpha1"),
    "ResourceInterpreterCustomization": (
        "config.karmada.io_resourceinterpretercustomizations.yaml",
        "v1alpha1",
    ),
}


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(POLICIES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc is not None:
                out.append((path.name, doc))
    return out


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in documents() if doc["kind"] == kind]


def by_file(name: str) -> dict[str, Any]:
    docs = [doc for file, doc in documents() if file == name]
    assert len(docs) == 1
    return docs[0]


@pytest.mark.parametrize(("name", "doc"), documents(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_document_is_valid(shared_data: Path, name: str, doc: dict[str, Any]) -> None:
    kind = doc["kind"]
    if kind in CRD_FOR_KIND:
        crd, version = CRD_FOR_KIND[kind]
        assert doc["apiVersion"] == f"{crd.split('_')[0]}/{version}"
        s.validate(shared_data, doc, crd, version)
    elif kind == "MutatingWebhookConfiguration":
        import kubernetes_validate

        kubernetes_validate.validate(doc, "1.31", strict=True)
    elif kind == "ClusterTaintPolicy":
        check_cluster_taint_policy_shape(doc)
    else:
        pytest.fail(f"{name}: no schema for {kind}")


def check_cluster_taint_policy_shape(doc: dict[str, Any]) -> None:
    """Its CRD is not among the shared Karmada CRDs: check the documented v1alpha1 shape by hand."""
    assert doc["apiVersion"] == "policy.karmada.io/v1alpha1"
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    assert "namespace" not in doc["metadata"]  # cluster-scoped
    spec = doc["spec"]
    assert set(spec) <= {"targetClusters", "addOnConditions", "removeOnConditions", "taints"}
    assert set(spec["targetClusters"]) <= {"clusterNames", "exclude", "labelSelector", "fieldSelector"}
    for key in ("addOnConditions", "removeOnConditions"):
        for condition in spec[key]:
            assert set(condition) == {"conditionType", "operator", "statusValues"}
            assert condition["operator"] in ("In", "NotIn")
            assert all(v in ("True", "False", "Unknown") for v in condition["statusValues"])
    assert spec["taints"]
    for taint in spec["taints"]:
        assert set(taint) <= {"key", "value", "effect"}
        assert taint["effect"] in ("NoSchedule", "NoExecute")


def test_shape_check_catches_mistakes() -> None:
    good = by_file("clustertaintpolicy-not-ready.yaml")
    check_cluster_taint_policy_shape(good)
    for mutate in (
        lambda d: d["spec"]["taints"][0].update(effect="Evict"),
        lambda d: d["spec"]["addOnConditions"][0].update(operator="Exists"),
        lambda d: d["spec"]["addOnConditions"][0].update(statusValues=[True]),
        lambda d: d.update(apiVersion="policy.karmada.io/v1beta1"),
        lambda d: d["spec"].update(taint=[]),
    ):
        bad = copy.deepcopy(good)
        mutate(bad)
        with pytest.raises(AssertionError):
            check_cluster_taint_policy_shape(bad)


def test_schema_validation_catches_mistakes(shared_data: Path) -> None:
    import jsonschema

    pp = copy.deepcopy(by_file("propagationpolicy-cluster-failover.yaml"))
    pp["spec"]["failover"]["cluster"]["purgeMode"] = "Never"  # only application failover has Never
    with pytest.raises(jsonschema.ValidationError):
        s.validate(shared_data, pp, *CRD_FOR_KIND["PropagationPolicy"])


def test_cluster_taint_policy_taints_not_ready_clusters_with_no_execute(shared_data: Path) -> None:
    policy = by_file("clustertaintpolicy-not-ready.yaml")
    taint = policy["spec"]["taints"][0]
    assert taint["effect"] == "NoExecute"
    assert policy["spec"]["addOnConditions"] == [
        {"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}
    ]
    # The same taint key Karmada v1.18.2 put on the not-ready cluster in the recorded run.
    clusters = s.load(shared_data, "scenA/clusters-after-failover.json")["items"]
    recorded = {(t["key"], t["effect"]) for c in clusters for t in c["spec"].get("taints", [])}
    assert (taint["key"], "NoExecute") in recorded
    tolerated = by_file("propagationpolicy-cluster-failover.yaml")["spec"]["placement"]["clusterTolerations"]
    assert tolerated[0]["key"] == taint["key"] and tolerated[0]["effect"] == "NoExecute"


def test_failover_policies_place_one_flink_deployment_on_one_cluster() -> None:
    for name in (
        "propagationpolicy-cluster-failover.yaml",
        "propagationpolicy-application-failover.yaml",
        "propagationpolicy-with-karmada-state-preservation.yaml",
    ):
        spec = by_file(name)["spec"]
        assert spec["placement"]["spreadConstraints"] == [
            {"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}
        ]
        assert all(sel["apiVersion"].startswith("flink.apache.org/") for sel in spec["resourceSelectors"])
        if "application" in spec["failover"]:
            assert spec["propagateDeps"] is True


def test_our_policies_need_no_state_preservation() -> None:
    for name in ("propagationpolicy-cluster-failover.yaml", "propagationpolicy-application-failover.yaml"):
        for failover in by_file(name)["spec"]["failover"].values():
            assert "statePreservation" not in failover
            assert failover["purgeMode"]  # chosen explicitly, explained in the file's comments


def test_karmada_state_preservation_done_right() -> None:
    failover = by_file("propagationpolicy-with-karmada-state-preservation.yaml")["spec"]["failover"]
    labels = RestorePolicy().job_id_labels
    for kind in ("cluster", "application"):
        assert failover[kind]["purgeMode"] == "Directly"  # Karmada injects only with Directly
        for rule in failover[kind]["statePreservation"]["rules"]:
            assert rule["jsonPath"].replace(" ", "") == "{.jobStatus.jobId}"
            assert rule["aliasLabelName"] in labels
    # It matches what Karmada really stored in the recorded runs.
    assert failover["cluster"]["statePreservation"]["rules"][0]["aliasLabelName"] == (
        "application.karmada.io/cluster-failover-jobid"
    )


def test_work_webhook_registration() -> None:
    config = by_file("work-webhook.yaml")
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Fail"
    assert hook["sideEffects"] == "None"
    assert hook["clientConfig"]["url"].endswith(WORK_PATH)
    assert hook["rules"] == [
        {
            "apiGroups": ["work.karmada.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["works"],
            "scope": "Namespaced",
        }
    ]
    expressions = " ".join(c["expression"] for c in hook["matchConditions"])
    assert "karmada-es-" in expressions and "flink.apache.org/" in expressions
    assert hook["timeoutSeconds"] <= 30


# --- the retention script, run in a real Lua 5.1 (the dialect of Karmada's gopher-lua) ----------------------


def retain(script: str, desired: dict[str, Any], observed: dict[str, Any] | None) -> dict[str, Any]:
    """Retain run as karmada-controller-manager runs it (its Lua sandbox, its JSON encoding)."""
    sandbox = karmada_lua()
    sandbox.load(script)
    out: dict[str, Any] = convert(sandbox, "retention", desired, observed=observed)
    return out


RESTORE = {
    "flink-failover.io/restore-decision": "restored",
    "flink-failover.io/restored-from": "s3://bucket/checkpoints/3c653dbe4c19bb72f8eb28445541bed6/chk-42",
    "flink-failover.io/restored-job-id": "3c653dbe4c19bb72f8eb28445541bed6",
}


@pytest.fixture
def template(shared_data: Path) -> dict[str, Any]:
    """The FlinkDeployment as Karmada sends it to member2 (recorded), i.e. the desired object."""
    work = s.flink_work(shared_data, "scenA/works-member2-final.json", "orders-flinkdeployment")
    manifest: dict[str, Any] = work["spec"]["workload"]["manifests"][0]
    return manifest


@pytest.mark.parametrize("kind", ["FlinkDeployment", "FlinkSessionJob"])
def test_retention_keeps_the_restore(template: dict[str, Any], kind: str) -> None:
    docs = {d["spec"]["target"]["kind"]: d for d in of_kind("ResourceInterpreterCustomization")}
    script = docs[kind]["spec"]["customizations"]["retention"]["luaScript"]
    assert set(docs[kind]["spec"]["customizations"]) == {"retention"}
    observed = copy.deepcopy(template)
    observed["spec"]["job"]["initialSavepointPath"] = RESTORE["flink-failover.io/restored-from"]
    observed["metadata"]["annotations"].update(RESTORE)
    observed["metadata"]["annotations"]["operator.example/other"] = "not ours"
    observed["status"] = {"jobStatus": {"state": "RUNNING"}}

    result = retain(script, copy.deepcopy(template), observed)
    assert result["spec"]["job"]["initialSavepointPath"] == RESTORE["flink-failover.io/restored-from"]
    for key, value in RESTORE.items():
        assert result["metadata"]["annotations"][key] == value
    assert "operator.example/other" not in result["metadata"]["annotations"]
    expected = copy.deepcopy(template)
    expected["spec"]["job"]["initialSavepointPath"] = RESTORE["flink-failover.io/restored-from"]
    expected["metadata"]["annotations"].update(RESTORE)
    assert result == expected  # nothing else changed

    # A path the user sets in the template wins.
    desired = copy.deepcopy(template)
    desired["spec"]["job"]["initialSavepointPath"] = "s3://bucket/savepoints/savepoint-3c653d-0123456789ab"
    assert retain(script, desired, observed)["spec"]["job"]["initialSavepointPath"] == (
        "s3://bucket/savepoints/savepoint-3c653d-0123456789ab"
    )
    # Nothing to keep: the desired object passes through unchanged.
    assert retain(script, copy.deepcopy(template), copy.deepcopy(template)) == template
    # A template without annotations, and a session cluster without a job, do not break it.
    bare = copy.deepcopy(template)
    del bare["metadata"]["annotations"]
    assert retain(script, bare, observed)["metadata"]["annotations"] == RESTORE
    session = copy.deepcopy(template)
    del session["spec"]["job"]
    assert "job" not in retain(script, session, observed)["spec"]


@pytest.mark.parametrize("kind", ["FlinkDeployment", "FlinkSessionJob"])
def test_retention_keeps_held_and_fenced_copies_suspended(template: dict[str, Any], kind: str) -> None:
    docs = {d["spec"]["target"]["kind"]: d for d in of_kind("ResourceInterpreterCustomization")}
    script = docs[kind]["spec"]["customizations"]["retention"]["luaScript"]
    assert template["spec"]["job"].get("state", "running") == "running"
    hold = "epoch 1: waiting for member1 to stop; heartbeat age 3s; until 2026-12-01T15:00:30Z unless renewed"
    held = copy.deepcopy(template)
    held["spec"]["job"]["state"] = "suspended"
    held["metadata"]["annotations"].update(
        {**RESTORE, "flink-failover.io/hold": hold, "flink-failover.io/epoch": "1"}
    )
    result = retain(script, copy.deepcopy(template), held)
    assert result["spec"]["job"]["state"] == "suspended"
    assert result["metadata"]["annotations"]["flink-failover.io/hold"] == hold
    assert result["metadata"]["annotations"]["flink-failover.io/epoch"] == "1"
    # Released by the agent (running, no hold): the template's state stands.
    released = copy.deepcopy(held)
    released["spec"]["job"]["state"] = "running"
    del released["metadata"]["annotations"]["flink-failover.io/hold"]
    out = retain(script, copy.deepcopy(template), released)
    assert out["spec"]["job"].get("state", "running") == "running"
    assert "flink-failover.io/hold" not in out["metadata"]["annotations"]

    stale = copy.deepcopy(template)
    stale["spec"]["job"].update({"state": "suspended", "upgradeMode": "stateless"})
    stale["metadata"].setdefault("labels", {})["flink-failover.io/fenced"] = "2"
    stale["metadata"]["annotations"]["flink-failover.io/fenced-by"] = (
        "member3 at epoch 2, stopped 2026-12-01T15:00:00Z"
    )
    kept = retain(script, copy.deepcopy(template), stale)
    assert kept["spec"]["job"]["state"] == "suspended" and kept["spec"]["job"]["upgradeMode"] == "stateless"
    assert kept["metadata"]["labels"]["flink-failover.io/fenced"] == "2"
    assert kept["metadata"]["annotations"]["flink-failover.io/fenced-by"].startswith("member3")


# --- the Work webhook's matchConditions, evaluated by a CEL implementation --------------------------------


def _match(expressions: list[str], work: dict[str, Any], namespace: str) -> bool:
    """All matchConditions true; an evaluation error raises (under failurePolicy Fail it would reject)."""
    import celpy

    activation = {"object": celpy.json_to_cel(work), "request": celpy.json_to_cel({"namespace": namespace})}
    env = celpy.Environment()
    for expression in expressions:
        try:
            result = env.program(env.compile(expression)).evaluate(activation)
        except celpy.CELEvalError as exc:
            raise AssertionError(f"{expression!r} failed: {exc}") from None
        if isinstance(result, celpy.CELEvalError):
            raise AssertionError(f"{expression!r} failed: {result}")
        if not bool(result):
            return False
    return True


def test_match_conditions_select_exactly_the_flink_works(shared_data: Path) -> None:
    (hook,) = by_file("work-webhook.yaml")["webhooks"]
    expressions = [c["expression"] for c in hook["matchConditions"]]
    flink = s.flink_work(shared_data, "scenA/works-member2-final.json", "orders-flinkdeployment")
    assert _match(expressions, flink, "karmada-es-member2")
    for other in s.other_works(shared_data, "scenA/works-member2-final.json"):
        assert not _match(expressions, other, "karmada-es-member2")
    assert not _match(expressions, flink, "analytics")  # not an execution namespace
    session_job = copy.deepcopy(flink)
    session_job["spec"]["workload"]["manifests"][0]["kind"] = "FlinkSessionJob"
    assert _match(expressions, session_job, "karmada-es-member2")
    # Odd Works must evaluate to false, not to an error that would block them.
    for odd in (
        {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "metadata": {"name": "x"}},
        {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "spec": {}},
        {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "spec": {"workload": {}}},
        {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "spec": {"workload": {"manifests": []}}},
        {
            "apiVersion": "work.karmada.io/v1alpha1",
            "kind": "Work",
            "spec": {"workload": {"manifests": [{"kind": "X"}]}},
        },
        {
            "apiVersion": "work.karmada.io/v1alpha1",
            "kind": "Work",
            "spec": {"workload": {"manifests": [{"apiVersion": 3}]}},
        },
    ):
        assert not _match(expressions, odd, "karmada-es-member2")


# --- Karmada's Lua sandbox ---------------------------------------------------------------------------


def lua_scripts() -> list[tuple[str, str, str]]:
    """(file, customization, script) of every Lua script shipped under policies/."""
    out = []
    for path in sorted((REPO / "policies").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not doc or doc.get("kind") != "ResourceInterpreterCustomization":
                continue
            for operation, body in doc["spec"]["customizations"].items():
                if isinstance(body, dict) and "luaScript" in body:
                    out.append((path.name, operation, body["luaScript"]))
    return out


def test_every_shipped_lua_script_is_found() -> None:
    found = {(name, op) for name, op, _ in lua_scripts()}
    assert ("resourceinterpretercustomization-flink-components.yaml", "componentResource") in found
    assert ("resourceinterpretercustomization-flink-retention.yaml", "retention") in found
    for operation in ("healthInterpretation", "statusReflection", "statusAggregation", "retention"):
        assert ("resourceinterpretercustomization-flink-bluegreen.yaml", operation) in found
    assert ("resourceinterpretercustomization-flink-bluegreen.yaml", "componentResource") in found


@pytest.mark.parametrize(("name", "operation", "script"), lua_scripts(), ids=lambda v: str(v)[:40])
def test_shipped_lua_uses_only_what_karmada_offers(name: str, operation: str, script: str) -> None:
    """Each script loads in Karmada's sandbox, defines its entry point, and every library function it
    names exists there (a call to a missing one would fail only on the path that reaches it)."""
    sandbox = karmada_lua()
    sandbox.load(script)
    globals_ = sandbox.runtime.globals()
    assert globals_[ENTRY_POINTS[operation]] is not None
    for lib, fn in re.findall(r"\b(string|table|math|os)\.([A-Za-z_]\w*)", script):
        assert globals_[lib][fn] is not None, f"{name}: {lib}.{fn} does not exist in Karmada's sandbox"
    for lib in re.findall(r"\b(io|debug|coroutine)\.", script):
        raise AssertionError(f"{name}: the {lib} library does not exist in Karmada's sandbox")
    for blocked in ("setmetatable", "getmetatable", "rawget", "rawset", "loadstring", "load"):
        assert not re.search(rf"\b{blocked}\s*\(", script), f"{name}: {blocked} raises in Karmada's sandbox"
    if operation == "componentResource" and "bluegreen" not in name:  # and it runs on a FlinkDeployment
        out = sandbox.call(
            "GetComponents", {"spec": {"jobManager": {"resource": {"cpu": 1, "memory": " 2048m "}}}}
        )
        assert out[0]["replicaRequirements"]["resourceRequest"] == {"cpu": "1000m", "memory": "2Gi"}


PLANTED = """
function GetComponents(obj)
  local memory = string.gsub(obj.spec.jobManager.resource.memory, "%s", "")
  return {{name = "jobmanager", replicas = 1, replicaRequirements = {resourceRequest = {memory = memory}}}}
end
"""


def test_a_planted_gsub_fails_in_the_sandbox_as_in_karmada() -> None:
    """What failed on a real v1.18.2 fails here: the same script runs in PUC Lua but not in the sandbox."""
    obj = {"spec": {"jobManager": {"resource": {"memory": "2Gi"}}}}
    import lupa.lua51

    from tests.support.karmada_lua import to_lua

    plain = lupa.lua51.LuaRuntime()
    plain.execute(PLANTED)
    assert plain.globals().GetComponents(to_lua(plain, obj))[1].name == "jobmanager"
    sandbox = karmada_lua()
    with pytest.raises(
        sandbox.error, match=re.escape("The Lua function string.gsub is not supported by Karmada")
    ):
        sandbox.run(PLANTED, "GetComponents", obj)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("return string.rep('x', 3)", "string.rep is not supported by Karmada"),
        ("return ('x'):rep(3)", "string.rep is not supported by Karmada"),
        ("return string.dump(print)", "string.dump is not supported by Karmada"),
        ("return ('a b'):gsub(' ', '')", "string.gsub is not supported by Karmada"),
        ("return io.open('/etc/passwd')", "attempt to index"),
        ("return debug.traceback()", "attempt to index"),
        ("return coroutine.create(print)", "attempt to index"),
        ("return os.getenv('HOME')", "attempt to call"),
        ("return setmetatable({}, {})", "setmetatable is not supported in karmada"),
        ("return loadstring('return 1')()", "loadstring is not supported in karmada"),
        ("return rawget({}, 1)", "rawget is not supported in karmada"),
        ("return require('io')", "module 'io' not found"),
        ("return type(string.match('a', 'b'))", "bad argument #1 to 'type'"),  # gopher-lua: no value at all
        ("return string.format('%d', 3)", "verb %d is not emulated"),
        ("while true do end", "context deadline exceeded"),
    ],
)
def test_the_sandbox_is_karmadas(code: str, message: str) -> None:
    sandbox = karmada_lua()
    with pytest.raises(sandbox.error, match=re.escape(message)):
        sandbox.load(f"function F() {code} end")
        sandbox.call("F")


def test_what_karmada_allows_runs_and_answers() -> None:
    """The methods Karmada keeps (upper, lower, sub, char, len) answer as in Lua (before: only "did not
    raise" was checked)."""
    sandbox = karmada_lua()
    sandbox.load(
        "function F() local s = ('x'):upper() .. string.char(0):sub(2) "
        "return string.len(s), ('y'):lower(), s end"
    )
    assert sandbox.call("F") == (1, "y", "X")


def test_the_sandbox_caps_string_arguments() -> None:
    sandbox = karmada_lua()
    sandbox.load("function F(s) return string.sub(s, 1, 1), string.len(s) end")
    assert sandbox.call("F", "x" * 1_000_000) == ("x", 1_000_000)  # at the limit: read whole
    with pytest.raises(sandbox.error, match="exceeds the maximum allowed input string length 1000000"):
        sandbox.call("F", "x" * 1_000_001)


def test_the_sandbox_encodes_results_as_karmada() -> None:
    sandbox = karmada_lua()
    sandbox.load("function F() return {a = {}, b = {1, 2}, c = 1.5, d = 'x', e = 3} end")
    assert sandbox.call("F") == {"a": [], "b": [1, 2], "c": 1.5, "d": "x", "e": 3}
    sandbox.load("function F() return {1, x = 2} end")
    with pytest.raises(ValueError, match="mixed or invalid key types"):
        sandbox.call("F")
