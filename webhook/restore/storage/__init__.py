"""Storage, the restore room's one I/O edge, through fsspec, one concern a module: ``backends`` (each
backend's client and defaults, the deadline, the errors), ``requests`` (a lookup's requests counted and run),
``listings`` (folders, prefixes and files read, once per lookup), ``verify`` (the files a ``_metadata`` names,
with the verdict), ``presigned`` (S3 HEADs by presigned URL), ``search`` (which snapshots a job has:
``CheckpointStorage``, the door every caller uses).
"""
