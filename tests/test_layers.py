"""The house keeps its shape: the import-linter contracts of pyproject.toml hold, and no import circle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def lint(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
         "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))",
         str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_layer_contracts_hold():
    linted = lint(ROOT / "pyproject.toml")
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "0 broken" in linted.stdout


def test_a_shortcut_import_breaks_a_contract(tmp_path):
    # The same checker over a contract the code breaks (the engine imports the store): the
    # test above would fail on a broken one.
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_package = "wfctl"\n\n'
                      '[[tool.importlinter.contracts]]\nname = "store over engine"\n'
                      'type = "layers"\nlayers = ["wfctl.store", "wfctl.engine"]\n')
    linted = lint(config)
    assert linted.returncode != 0
    assert "BROKEN" in linted.stdout


def circles(graph: grimp.ImportGraph) -> list[set[str]]:
    """The strongly connected groups of modules (Tarjan), each of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(group)

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_wfctl_imports_itself_in_a_circle():
    # Type-checking imports count: a circle in type hints is a circle in the design.
    graph = grimp.build_graph("wfctl", exclude_type_checking_imports=False)
    assert circles(graph) == []
