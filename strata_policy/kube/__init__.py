"""Kubernetes integration: a client of Strata's gRPC API (DESIGN §9), never of the engine.

``translate``-side modules are pure functions over the JSON the API server sends (``nodes``,
``pods``, ``scopes``, ``platforms``, ``mirror``, ``patches``, ``gated``); ``api``, ``reflector``,
``sync`` and ``admit`` do the I/O; ``cli.main`` runs them. See docs/kubernetes.md.
"""
