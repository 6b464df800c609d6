"""What both roles share: the AdmissionReview envelope, JSON patches, the Flink resource, untyped reading."""
