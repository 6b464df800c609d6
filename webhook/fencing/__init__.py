"""One running copy of every job: ownership records in the job's checkpoint storage.

Karmada fences nothing, and during a partition the job's checkpoint storage is the only channel both
clusters reach. ``protocol`` is the pure core (who may run, given heartbeats, fences, acks and the
storage's own times); ``decide`` turns one copy's records into ``effects``; ``starts`` says what a
release or a resume starts from; ``patches`` and ``holdtexts`` are how a copy moves and what a hold
says. ``records`` reads and writes the records through fsspec, each call on its storage's lane under a
deadline that holds (``lanes``: one per process, shared by the webhook's ``gate`` and the agent; the
heartbeats on a lane of their own). ``agent`` is the loop each member cluster runs beside the webhook:
it only executes effects (``executors``, ``patcher``), its heartbeats renewed by ``renewer`` and the
running jobs' checks ahead of a failover run by ``prechecker``; ``flinkapi`` is its Kubernetes edge.

What it guarantees: a restored copy runs only once the old copy is known stopped or its lease has run
out on the storage's clock. What it does not: stop a JobManager whose cluster's agent is gone (that is
``webhook.keeper``). docs/failover.md ("One running copy") has the protocol with a sequence diagram.
"""
