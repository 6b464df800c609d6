"""The committed generated modules are exactly what the pinned grpcio-tools makes from the .proto files."""

from __future__ import annotations

from pathlib import Path

from tests.estimator.protogen import PROTO_DIR, REPO, generate


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    fresh = generate(tmp_path)
    assert len(fresh) == 9  # 4 x (_pb2.py, _pb2.pyi) + service_pb2_grpc.py
    committed = sorted((REPO / PROTO_DIR).glob("*_pb2*.py*"))
    assert [p.name for p in committed] == [p.name for p in fresh]
    for new in fresh:
        old = REPO / PROTO_DIR / new.name
        assert old.read_bytes() == new.read_bytes(), f"{old} is stale: run make proto"
