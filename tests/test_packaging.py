"""The package as pip installs it: the wheel holds the code, the completions, the examples and
the licence, and its metadata says what the project is (MIT, its authors, its typer range)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import wfctl

REPO = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The wheel built from a copy of the sources (a build leaves build/ and *.egg-info behind),
    without build isolation: no network, the setuptools installed here."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "wfctl", source / "wfctl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-q", "-w", str(out), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    [path] = out.glob("wfctl-*.whl")
    with zipfile.ZipFile(path) as archive:
        yield archive


def metadata(wheel: zipfile.ZipFile) -> dict[str, list[str]]:
    [name] = [name for name in wheel.namelist() if name.endswith(".dist-info/METADATA")]
    message = Parser().parsestr(wheel.read(name).decode())
    return {key: message.get_all(key) for key in set(message.keys())}


def test_the_wheel_holds_the_licence_the_completions_and_the_examples(wheel):
    names = set(wheel.namelist())
    [licence] = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
    assert wheel.read(licence) == (REPO / "LICENSE").read_bytes()
    # Copies of the scripts in the repository's top-level completions/.
    for script in sorted((REPO / "completions").iterdir()):
        assert wheel.read(f"wfctl/completions/{script.name}") == script.read_bytes()
    assert {"wfctl/examples/demo.yaml", "wfctl/examples/etl.py", "wfctl/cli/fast.py",
            "wfctl/store/sqlite.py"} <= names
    assert not any(name.startswith("tests/") or "__pycache__" in name for name in names)


def test_the_licence_is_mit_for_wfctl_contributors_in_2026():
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 wfctl contributors\n")


def test_the_metadata_names_the_licence_authors_classifiers_and_versions(wheel):
    meta = metadata(wheel)
    assert meta["License-Expression"] == ["MIT"]
    assert meta["License-File"] == ["LICENSE"]
    assert meta["Author"] == ["wfctl contributors"]
    assert meta["Version"] == [wfctl.__version__]
    assert "Programming Language :: Python :: 3.11" in meta["Classifier"]
    assert "Environment :: Console" in meta["Classifier"]
    requires = meta["Requires-Dist"]
    # wfctl subclasses typer.core internals: typer is bounded above.
    assert "typer<0.30,>=0.12" in requires
    # The linter is a developer's tool, not the suite's.
    assert not any(req.startswith("ruff") and 'extra == "test"' in req for req in requires)
    assert any(req.startswith("ruff") and 'extra == "dev"' in req for req in requires)

