"""Storage, the restore room's one I/O edge, through fsspec, one concern a module.

``search`` is the door every caller uses (``CheckpointStorage.snapshots``): one listing of the job's
directory, then each ``chk-N`` from the highest down and the job's savepoints side by side, each
candidate checked as the policy's ``verify`` says (its folder and whole ``_metadata`` in one round trip).
``verify`` finds the files a ``_metadata`` names that the job's verdict does not cover, by the fewest
requests: HEADs, prefix or folder listings, and on S3 presigned HEADs over one pooled client
(``presigned``) or a large folder cut into key ranges (``ranges``). ``listings`` reads each folder,
prefix and file once per lookup; ``requests`` counts them against ``verifyBudget`` and runs them on
daemon threads; ``backends`` builds each backend's client, its defaults, the deadline and the errors;
``pool`` runs a lookup under the admission deadline, and a storage hung past one is not asked again
until that lookup ends.

What it guarantees: every call has a deadline, and a failure is a ``StorageError`` the decision handles.
What it does not: it decides nothing (the rules are ``restore.snapshots`` and ``restore.verdict``).
"""
