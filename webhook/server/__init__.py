"""The HTTPS edge: Flask routes, gunicorn, TLS with hot reload, metrics and logs. No decisions here.

Rule of this package: it knows no role. It imports only itself and ``webhook.common``; roles are
handed to it as endpoints by the composition root, ``webhook.roles`` (``tests/test_imports.py``).
"""
