"""JIT flags for every kernel, in one place.

Every kernel is compiled with ``JIT``: ``nogil`` so that the gRPC server's worker threads can
run placements side by side, ``cache`` so that a restarted server loads the machine code from
``__pycache__`` instead of compiling again. Setting ``NUMBA_DISABLE_JIT=1`` in the environment
turns every kernel into plain Python (numba honours it itself), which is how coverage runs and
how ``make test`` runs the tests marked ``nojit`` a second time.
Kernels are declared with ``@kernel``, which is ``njit(**JIT)`` keeping the function's type.

Every kernel is also compiled *without numba's reference counting* (``_nrt=False``): a kernel
never allocates (callers pass every output and scratch array, and a kernel takes views of
them), so there is nothing for the runtime to free. With it on, numba increments and decrements
an atomic count on every array argument of each inlined helper call: in the block search's loop
over blocks and nodes that was half of a placement's time (seen with ``perf``: ``NRT_incref`` /
``NRT_decref``), and unboxing an argument from Python costs about half as much without it. A
kernel that allocates does not compile (numba: "NRT required but not enabled").

The cache lives in a folder named after a digest of every kernel source file (a file of this
package that declares a kernel; the pure-Python wrappers do not count) and numba's version.
numba invalidates a cached kernel only when *its own* file changes, so a kernel that inlines a
helper from another file would otherwise keep running the helper's old code after an upgrade;
with the digest in the path, any change to any kernel file starts a fresh cache. The
base folder is ``NUMBA_CACHE_DIR`` when set (the container image sets it), else the kernels'
own ``__pycache__`` when writable, else ``~/.cache/strata-policy``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import numba
from numba import njit

JIT: Final = {"nogil": True, "cache": True, "_nrt": False}


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def cache_dir() -> Path:
    """Where compiled kernels are cached: a folder per version of the kernels' sources."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256(numba.__version__.encode())
    for source in sorted(here.glob("*.py")):
        text = source.read_bytes()
        if b"@kernel" in text or b"@inline_kernel" in text:
            digest.update(source.name.encode())
            digest.update(text)
    name = f"strata-kernels-{digest.hexdigest()[:16]}"
    candidates = [Path(os.environ["NUMBA_CACHE_DIR"])] if os.environ.get("NUMBA_CACHE_DIR") else []
    candidates += [here / "__pycache__", Path.home() / ".cache" / "strata-policy"]
    for base in candidates:
        if _writable(base / name):
            return base / name
    return candidates[-1] / name  # numba warns and compiles without a cache if this fails too


numba.config.CACHE_DIR = str(cache_dir())  # type: ignore[attr-defined]  # set at import by numba

F = TypeVar("F", bound=Callable[..., object])

# A kernel called from another with an integer constant would be compiled again for that
# constant's literal type (``Literal[int](0)``) beside the ``int64`` version: callers pass
# ``np.int64(0)`` instead, which halves the cold warm-up of the kernels called both ways.


_njit: Callable[..., Any] = njit  # the stubs do not declare ``_nrt``


def kernel(fn: F) -> F:
    """Compile ``fn`` lazily with the project's JIT flags."""
    return cast(F, _njit(fn, **JIT))


def inline_kernel(fn: F) -> F:
    """A small helper inlined into its callers at numba IR level (hot per-node checks)."""
    return cast(F, _njit(fn, **JIT, inline="always"))
