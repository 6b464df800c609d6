"""``python -m webhook``: the ``flink-failover`` command (``webhook/cli.py``)."""

from webhook.cli import main

raise SystemExit(main())
