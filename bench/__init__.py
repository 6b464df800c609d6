"""Benchmarks: every ``bench/<name>.py`` module with a ``main()`` is one benchmark (``python -m bench``)."""
