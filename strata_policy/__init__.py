"""Strata policy engine."""
