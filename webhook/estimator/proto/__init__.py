"""Karmada's scheduler-estimator messages and service: the .proto files written from Karmada's published
definitions and the modules grpcio-tools generated from them (``make proto``)."""
