"""What every role shares: the AdmissionReview envelope, JSON patches, the Flink resource and its storage
paths, untyped reading, the label and annotation contract, the Kubernetes client and the one list-watch
loop. Rule of this package: it imports no role."""
