"""The commands of ``flink-failover``, one module each (``cli.py`` dispatches): each parses its own
arguments (``add_arguments``), runs (``run``, returning the exit code) and says what the user reads
(``HELP``). Above the roles and the rooms: nothing below imports a command (tests/test_imports.py)."""
