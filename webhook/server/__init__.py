"""The HTTPS edge: Flask routes, gunicorn, TLS with hot reload, metrics and logs. No decisions here."""
