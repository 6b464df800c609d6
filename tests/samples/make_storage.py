"""Create the local checkpoint tree the sample reviews point at (used by `make run` and the tests).

/tmp/flink-failover-samples/checkpoints/3c653dbe4c19bb72f8eb28445541bed6/
    chk-7/_metadata, chk-8/_metadata, chk-9/ (in progress: no _metadata)
/tmp/flink-failover-samples/checkpoints/00000000000000000000000000000bad/
    chk-1/ (aborted: no _metadata)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path("/tmp/flink-failover-samples/checkpoints")
RESTORABLE = "3c653dbe4c19bb72f8eb28445541bed6"
EMPTY = "00000000000000000000000000000bad"


def flink_metadata(checkpoint_id: int) -> bytes:
    """A complete _metadata of a job without state: the magic number, format version 3, the checkpoint
    id, no master states, no operator states (what Flink reads to the end before it restores)."""
    return bytes.fromhex("4960672d00000003") + checkpoint_id.to_bytes(8, "big") + bytes(8)


def make(root: Path = ROOT) -> Path:
    """Idempotent and safe beside another run of itself (the suite's workers share the tree): each
    ``_metadata`` appears whole, by rename, never truncated under a reader."""
    for job, ids, complete in ((RESTORABLE, (7, 8, 9), (7, 8)), (EMPTY, (1,), ())):
        for n in ids:
            chk = root / job / f"chk-{n}"
            chk.mkdir(parents=True, exist_ok=True)
            metadata = chk / "_metadata"
            if n in complete and not (metadata.is_file() and metadata.read_bytes() == flink_metadata(n)):
                partial = chk / f".metadata.{os.getpid()}"
                partial.write_bytes(flink_metadata(n))
                os.replace(partial, metadata)
    return root


if __name__ == "__main__":
    print(make(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
