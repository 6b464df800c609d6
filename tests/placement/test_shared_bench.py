"""The shared benchmark's small and medium instances: never fewer sets than Karmada's own estimator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.placement import validator
from tests.support.karmada_figures import read_karmada_figures
from webhook.placement.cluster import load_cluster_file
from webhook.placement.components import load_workload
from webhook.placement.estimate import estimate
from webhook.placement.fields import load_documents
from webhook.placement.firstfit import first_fit
from webhook.placement.prepare import prepare


@pytest.mark.shared
def test_at_least_karmada_on_small_and_medium_rows(shared_data: Path, tmp_path: Path) -> None:
    bench = shared_data.parent / "bench"
    if not (bench / "make_placement_instances.py").is_file():
        pytest.fail(f"shared bench generator missing in {bench}")
    subprocess.run(
        [sys.executable, str(bench / "make_placement_instances.py"), str(tmp_path)],
        check=True,
        capture_output=True,
    )
    karmada = read_karmada_figures(bench / "README.md")
    checked = 0
    for instance in ("clusters-100.yaml", "clusters-1000.yaml"):
        (cluster,) = load_cluster_file(tmp_path / instance)
        for workload in ("small", "medium", "large", "ha"):
            comps = load_workload(load_documents(tmp_path / f"workload-{workload}.yaml")[0])
            result = estimate(cluster, comps)
            validator.check(cluster, comps, result.sets, result.assignment)
            assert result.sets >= karmada[(instance, workload)].sets, (instance, workload)
            assert result.sets <= result.upper_bound
            # the first-fit baseline reproduces Karmada's own figure on the same input
            assert first_fit(prepare(cluster, comps), 10**6)[0] == karmada[(instance, workload)].sets
            checked += 1
    assert checked == 8
