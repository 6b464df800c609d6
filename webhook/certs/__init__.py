"""TLS certificates for the admission webhook: build (``pki``), store on disk (``store``), publish (``kube``)."""
