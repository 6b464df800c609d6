"""TLS certificates for the webhook: build (``pki``), keep on disk (``store``), publish (``secrets``)."""
