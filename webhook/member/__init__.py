"""The member role: restore a failed-over Flink job from its newest restorable checkpoint or savepoint."""
