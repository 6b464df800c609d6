"""Flink's ``_metadata`` file, read from its bytes (no I/O: the caller reads them).

Pure: ``member/storage.py`` hands it the bytes it read, and the decision gets what it found.
"""

from __future__ import annotations

# Flink's checkpoint metadata file (org.apache.flink.runtime.checkpoint.Checkpoints) starts with this
# 4-byte big-endian magic number, then a 4-byte metadata version (serializers V1..V7 so far: 4 from
# Flink 1.20, 6 from Flink 2.3, measured), then the serializer's first field: the checkpoint id as an
# 8-byte big-endian long (MetadataV2V3SerializerBase, every version since Flink 1.3).
METADATA_MAGIC = 0x4960672D
METADATA_HEADER_BYTES = 16  # magic, version, checkpoint id: the one small read per _metadata
METADATA_MIN_BYTES = 8  # magic and version: a file that ends there is truncated
MAX_METADATA_VERSION = 64  # newer Flink adds versions; far beyond the known ones is not a version
FIRST_VERSION_WITH_ID = 2  # the V1 format (Flink 1.2 and older) is not read for an id


def metadata_problem(head: bytes, size: int | None) -> str:
    """Why a ``_metadata`` file whose first bytes are ``head`` is not a complete Flink metadata file
    ("" when it can be one). An empty or truncated file (a crash while it was written, a copy cut
    short) passes an existence check, and restoring it fails the job on the new cluster."""
    if size == 0 or not head:
        return "_metadata is empty (0 bytes)"
    if len(head) < METADATA_MIN_BYTES or (size is not None and size <= METADATA_MIN_BYTES):
        return f"_metadata is truncated ({size if size is not None else len(head)} bytes)"
    magic = int.from_bytes(head[:4], "big")
    if magic != METADATA_MAGIC:
        return (
            f"_metadata is not a Flink metadata file (starts with 0x{magic:08x}, not 0x{METADATA_MAGIC:08x})"
        )
    version = int.from_bytes(head[4:8], "big", signed=True)
    if not 0 < version <= MAX_METADATA_VERSION:
        return f"_metadata has no valid Flink metadata version ({version})"
    return ""


def metadata_checkpoint_id(head: bytes) -> int | None:
    """The checkpoint id a complete ``_metadata`` header carries (bytes 8-16), None when it has none
    readable: a header of fewer than 16 bytes, the V1 format, or a negative number."""
    if len(head) < METADATA_HEADER_BYTES or metadata_problem(head, None):
        return None
    if int.from_bytes(head[4:8], "big", signed=True) < FIRST_VERSION_WITH_ID:
        return None
    value = int.from_bytes(head[8:16], "big", signed=True)
    return value if value >= 0 else None
