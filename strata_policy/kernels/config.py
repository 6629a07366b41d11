"""JIT flags for every kernel, in one place.

Every kernel is compiled with ``JIT``: ``nogil`` so that the gRPC server's worker threads can
run placements side by side, ``cache`` so that a restarted server loads the machine code from
``__pycache__`` instead of compiling again. Setting ``NUMBA_DISABLE_JIT=1`` in the environment
turns every kernel into plain Python (numba honours it itself), which is how coverage runs.
Kernels are declared with ``@kernel``, which is ``njit(**JIT)`` keeping the function's type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar, cast

from numba import njit

JIT: Final = {"nogil": True, "cache": True}

F = TypeVar("F", bound=Callable[..., object])


def kernel(fn: F) -> F:
    """Compile ``fn`` lazily with the project's JIT flags."""
    return cast(F, njit(fn, nogil=JIT["nogil"], cache=JIT["cache"]))


def inline_kernel(fn: F) -> F:
    """A small helper inlined into its callers at numba IR level (hot per-node checks)."""
    return cast(F, njit(fn, nogil=JIT["nogil"], cache=JIT["cache"], inline="always"))
