"""The python code blocks of docs/*.md run (in order, one namespace per page).

A block preceded by an HTML comment starting ``<!-- no-run`` is not run (a
pytest file, a fragment). Pages are checked separately, each in a fresh
interpreter, so one page's state never leaks into another's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK = re.compile(r"(?P<before>(?:<!--[^\n]*-->\s*\n)?)```python\n(?P<code>.*?)```", re.DOTALL)


def runnable_blocks(text: str) -> list[str]:
    """The python blocks of a page, without those marked ``<!-- no-run ... -->``."""
    return [m.group("code") for m in BLOCK.finditer(text)
            if not m.group("before").lstrip().startswith("<!-- no-run")]


def test_block_extraction_honours_no_run():
    text = "a\n```python\nx = 1\n```\n<!-- no-run: fragment -->\n```python\nboom(\n```\n"
    assert runnable_blocks(text) == ["x = 1\n"]


PAGES = sorted(p.name for p in DOCS.glob("*.md") if runnable_blocks(p.read_text()))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("page", PAGES)
def test_docs_page_code_runs(page: str, tmp_path: Path):
    blocks = runnable_blocks((DOCS / page).read_text())
    script = tmp_path / "page.py"
    script.write_text("\n\n".join(f"# ---- block {i}\n{code}" for i, code in enumerate(blocks)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=150, cwd=tmp_path, env=env)
    assert proc.returncode == 0, f"docs/{page}:\n{proc.stderr[-3000:]}"
