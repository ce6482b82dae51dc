"""What a handler prints goes to stderr: stdout carries only what wfctl itself writes there."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TextIO


@contextlib.contextmanager
def handlers_print_to_stderr() -> Iterator[TextIO]:
    """While handlers may run (`work`, `deadlines check`), point stdout at stderr; yields the
    stream that stays on the real stdout, for wfctl's own output (`--json`'s document).

    Done for the whole process, and at the file descriptor: handlers run in threads of their
    own (a `contextlib.redirect_stdout` would be one process-wide swap, undone by whichever
    thread left it first), write through C libraries and programs they start, and run in child
    processes (`--isolation process`) that inherit descriptor 1. So `sys.stdout` becomes
    `sys.stderr`, and descriptor 1 a copy of descriptor 2, until the block ends.
    """
    original = own = sys.stdout
    original.flush()
    try:
        real = os.dup(1)
    except OSError:
        # No descriptor 1 (`>&-`): nothing a handler writes there reaches anyone's stdout.
        real = None
    if real is not None:
        try:
            os.dup2(2, 1)
        except OSError:
            # No descriptor 2 either: there is nowhere else to send it.
            os.close(real)
            real = None
    if real is not None and _descriptor(original) == 1:
        # The stream wfctl writes to is descriptor 1 itself: it moves to the real stdout.
        own = os.fdopen(os.dup(real), "w", encoding=original.encoding, errors=original.errors)
    sys.stdout = sys.stderr
    try:
        yield own
    finally:
        sys.stderr.flush()
        sys.stdout = original
        if own is not original:
            own.close()
        if real is not None:
            os.dup2(real, 1)
            os.close(real)


def _descriptor(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        # An in-memory stream (a test's CliRunner) has none.
        return None
