"""The engine's use cases over one cluster's state, inside the engine's transaction.

Part of the engine layer (between ``policy`` and ``service``): each function validates the
request against the state, runs the pure policies, applies the decisions to the state (which
records their undo) and returns a function of the committed generation that builds the answer.
"""
