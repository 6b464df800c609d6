"""Generate the estimator's Python gRPC modules from its .proto files (``make proto`` and the drift test).

The generated modules are committed, so neither ``pip install`` nor the image needs grpcio-tools; the
test regenerates them into a temporary folder and compares, so the committed code cannot drift from
the .proto files or the pinned grpcio-tools.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROTO_DIR = Path("webhook/estimator/proto")
PROTOS = ("k8s_core_v1.proto", "k8s_resource.proto", "estimator.proto", "service.proto")
GRPC_PROTOS = ("service.proto",)


def generate(out: Path) -> list[Path]:
    """Write every generated file under ``out`` (mirroring the repository layout); return their paths."""
    from grpc_tools import protoc

    out.mkdir(parents=True, exist_ok=True)
    for name in PROTOS:
        args = ["protoc", f"-I{REPO}", f"--python_out={out}", f"--pyi_out={out}"]
        if name in GRPC_PROTOS:
            args.append(f"--grpc_python_out={out}")
        args.append(str(REPO / PROTO_DIR / name))
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {name}")
    return sorted((out / PROTO_DIR).glob("*_pb2*.py*"))


def main() -> int:
    for path in generate(REPO):
        print(path.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
