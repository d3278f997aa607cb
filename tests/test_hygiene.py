"""The package's metadata and docs say what is true of the package."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tomllib

import aiograd

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_version_is_the_distributions():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert aiograd.__version__ == project["version"]
    assert "__version__" in aiograd.__all__


def test_license_file_matches_the_declared_license():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause"
    assert "LICENSE" in project["license-files"]
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")


def test_changelog_has_an_entry_for_the_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(aiograd.__version__)}\b", text, re.M)


def test_docs_speak_of_the_package_only():
    """No pointers to files the package does not ship, nor to how it was made."""
    pages = [*(ROOT / "docs").glob("**/*.md"), ROOT / "README.md"]
    for page in pages:
        text = page.read_text()
        for word in ("shared/seeds", "DESIGN.md", "DESIGN:", " session"):
            assert word not in text, f"{page.name} mentions {word!r}"


def test_distributed_without_its_extra_says_which_extra():
    code = ("import sys; sys.modules['grpc'] = None\n"
            "try:\n    import aiograd.distributed\n"
            "except ModuleNotFoundError as e:\n    print(e.name, '|', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.startswith("grpc | ") and "pip install 'aiograd[dist]'" in out
