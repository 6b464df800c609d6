"""Restore: which checkpoint or savepoint a failed-over Flink job starts from, or why it is held.

A checkpoint is listed and verified in ``storage`` (the one I/O edge, through fsspec), read by ``metadata``,
judged by ``checks`` (over ``common/flink_reads.py``), and chosen by ``decide``; the policy that steers it is
``webhook.policy``.
Used by the member role's webhook, the fencing agent, ``review`` and ``status``; imports no role.
"""
