"""The policy: what every role and command is told to do, declared, validated and loaded once.

``schema`` declares how a field is written (one declaration validates a file and emits the chart's JSON
Schema), ``restore`` the whole policy (``POLICY``) and ``fencing`` its fencing block; ``load`` finds the file
(``--policy``, ``$FLINK_FAILOVER_POLICY``, the shipped default) and reads it: every command calls its
``load``. Below restore and fencing, which read it; it imports neither, only ``common``
(tests/test_imports.py).
"""
