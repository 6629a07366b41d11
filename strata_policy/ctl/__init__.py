"""``strata-policy ctl``: the operator's commands over gRPC (part of the cli layer)."""
