"""What both roles share: the AdmissionReview envelope, JSON patches, the Flink resource, untyped
reading and the label and annotation contract. Rule of this package: it imports no role."""
