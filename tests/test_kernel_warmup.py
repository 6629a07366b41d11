"""``kernels.warmup.warmup()`` compiles (or loads from the cache) every public kernel, so that
no request after SERVING waits for numba: a kernel added to a module without a warm-up call
fails here."""

from __future__ import annotations

import subprocess
import sys

import numba
import pytest

# Run in a new interpreter: in this one, earlier tests have compiled kernels already.
_UNWARMED = """
import importlib, pkgutil
from numba.core.registry import CPUDispatcher
import strata_policy.kernels as package
from strata_policy.kernels.warmup import warmup

warmup()
for info in pkgutil.iter_modules(package.__path__):
    module = importlib.import_module(f"{package.__name__}.{info.name}")
    for name, value in vars(module).items():
        mine = isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__
        inlined = mine and value.targetoptions.get("inline") == "always"
        if mine and not inlined and not name.startswith("_") and not value.signatures:
            print(f"{module.__name__}.{name}")
"""


@pytest.mark.skipif(bool(numba.config.DISABLE_JIT), reason="without the JIT nothing compiles")
def test_warmup_compiles_every_public_kernel() -> None:
    """After ``warmup()`` in a fresh process, every public ``@kernel`` of ``kernels/`` has a
    compiled signature (inlined helpers, and kernels only other kernels call, are compiled
    inside their callers)."""
    done = subprocess.run(
        [sys.executable, "-c", _UNWARMED],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    assert done.stdout.split() == []
