"""The real-cluster suite runs only from `make e2e-kube` (STRATA_E2E_KUBE=1), not `make test`."""

from __future__ import annotations

import os

collect_ignore_glob = [] if os.environ.get("STRATA_E2E_KUBE") == "1" else ["*.py"]
