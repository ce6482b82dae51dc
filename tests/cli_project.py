"""A folder with a workflows.yaml and a database, and `wfctl` run over them in process: the
command-line tests' shared project."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from wfctl.cli.commands import app


class CliProject:
    """`project(*args)` runs `wfctl --db DB -w workflows.yaml *args` and gives typer's result."""

    def __init__(self, folder: Path, db: str, definitions: str) -> None:
        self.folder = folder
        self.db = db
        (folder / "workflows.yaml").write_text(textwrap.dedent(definitions))

    def __call__(self, *args: str, input: str | bytes | None = None) -> Result:
        return CliRunner().invoke(app, ["--db", self.db, "-w", str(self.folder / "workflows.yaml"),
                                        *args], input=input)

    def json(self, *args: str) -> tuple[int, Any]:
        result = self(*args, "--json")
        assert result.stdout, result.stderr
        return result.exit_code, json.loads(result.stdout)

    def status(self, instance_id: str) -> str:
        return self.json("describe", instance_id)[1]["status"]

    def lines(self, name: str, *lines: str) -> str:
        """A file of these lines in the folder; its path."""
        path = self.folder / name
        path.write_text("".join(line + "\n" for line in lines))
        return str(path)
