"""The estimator role: Karmada's scheduler-estimator gRPC API answered by component-fit placement.

``wire`` reads Karmada's messages into placement components, ``state`` keeps a member cluster's free
capacity from watched nodes and pods, ``answer`` computes the replies (pure), ``grpcserver`` and
``member_api`` are the thin edges, ``options`` the settings, ``run`` wires them for
``flink-failover serve --role estimator``.
See docs/placement.md.
"""
