"""JIT flags for every kernel, in one place.

Every kernel is compiled with ``@njit(**JIT)``: ``nogil`` so that the gRPC server's worker threads
can run placements side by side, ``cache`` so that a restarted server loads the machine code from
``__pycache__`` instead of compiling again. Setting ``NUMBA_DISABLE_JIT=1`` in the environment
turns every kernel into plain Python (numba honours it itself), which is how coverage runs.
"""

from __future__ import annotations

from typing import Final

JIT: Final = {"nogil": True, "cache": True}
