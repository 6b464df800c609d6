"""One running copy of every job: ownership records in the job's checkpoint storage.

Karmada fences nothing, and during a partition the job's checkpoint storage is the only channel both
clusters reach. ``protocol`` is the pure core (who may run, given heartbeats, fences, acks and the
storage's own times), ``records`` reads and writes those objects through fsspec, ``agent`` is the loop
each member cluster runs beside the webhook, ``flinkapi`` its thin Kubernetes edge. docs/failover.md
("One running copy") has the protocol with a sequence diagram.
"""
