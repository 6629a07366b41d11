"""Numba kernels over the node matrix: private @njit functions behind validating wrappers."""
