"""Karmada's own estimator figures from the shared benchmark README: the bar for tests and the bench."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

WORKLOADS = ("small", "medium", "large", "ha")


@dataclass(frozen=True)
class KarmadaRow:
    sets: int
    ms: float
    per_cluster: dict[str, tuple[int, float]]


def _lead_number(cell: str) -> float:
    match = re.match(r"\s*([\d,]+(?:\.\d+)?)", cell)
    if not match:
        raise ValueError(f"no number in {cell!r}")
    return float(match.group(1).replace(",", ""))


def read_karmada_figures(readme: Path) -> dict[tuple[str, str], KarmadaRow]:
    """(instance file, workload) -> Karmada's sets and time, from the README's two result tables."""
    rows: dict[tuple[str, str], KarmadaRow] = {}
    per_cluster: dict[str, dict[str, tuple[int, float]]] = {w: {} for w in WORKLOADS}
    detail_header: list[str] | None = None
    for line in readme.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            detail_header = None if not line.strip() else detail_header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "cluster" and "small" in cells:
            detail_header = cells
            continue
        if cells[0].startswith("clusters-") and len(cells) >= 6:
            rows[(cells[0], cells[3])] = KarmadaRow(int(_lead_number(cells[4])), _lead_number(cells[5]), {})
        elif detail_header and re.match(r"^[a-z]-\d+$", cells[0]):
            for name, cell in zip(detail_header[1:], cells[1:], strict=False):
                sets, ms = cell.split("/")
                per_cluster[name][cells[0]] = (int(sets), float(ms))
    for (instance, workload), row in list(rows.items()):
        if instance == "clusters-20x500.yaml":
            rows[(instance, workload)] = KarmadaRow(row.sets, row.ms, per_cluster.get(workload, {}))
    return rows
