"""The README's in-process example runs and gives the answer it shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example() -> None:
    """job-1's two replicas land on node-1 and node-2 with all eight devices each."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], "README.md", "exec"), {})  # our own README, not input
    printed = out.getvalue()
    assert "Placement(node_id='node-1', gpu_devices=(0, 1, 2, 3, 4, 5, 6, 7))" in printed
    assert "Placement(node_id='node-2', gpu_devices=(0, 1, 2, 3, 4, 5, 6, 7))" in printed
