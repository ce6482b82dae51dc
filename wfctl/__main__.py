"""`python -m wfctl`: the same as the `wfctl` command."""

from wfctl.cli import main

main()
