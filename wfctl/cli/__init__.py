"""The `wfctl` command.

`commands` is the typer application: every command, its options, help and completion. A plain
`describe`, `list` or `history` command line is run by `fast` without importing typer, which
takes longer to start than these commands take to run; both run the same bodies (`reads`).
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    """The console script."""
    from wfctl.cli import fast

    code = fast.run(sys.argv[1:])
    if code is None:
        from wfctl.cli.commands import app

        app(prog_name="wfctl")
    sys.exit(code)


def __getattr__(name: str) -> Any:
    """`wfctl.cli.app`, the typer application, imported on first use."""
    if name == "app":
        from wfctl.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
