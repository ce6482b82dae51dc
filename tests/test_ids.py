"""Activity, timer and run ids: 16 hex digits, made side by side in one process, apart in two."""

from __future__ import annotations

import itertools
import os
import re

from wfctl.engine.core import new_id


def test_the_ids_of_one_process_are_distinct_and_count_up_from_a_shared_first_half():
    ids = [new_id() for _ in range(1000)]

    assert all(re.fullmatch(r"[0-9a-f]{16}", one) for one in ids)
    assert len(set(ids)) == len(ids)
    assert len({one[:8] for one in ids}) == 1
    # Each next id is the one after (modulo 2^32 in the second half): neighbours in an index.
    halves = [int(one[8:], 16) for one in ids]
    assert all((b - a) % 2**32 == 1 for a, b in itertools.pairwise(halves))


def test_a_forked_child_makes_ids_of_its_own():
    before = new_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.write(write, new_id().encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read()
    os.waitpid(pid, 0)
    after = new_id()

    assert re.fullmatch(r"[0-9a-f]{16}", child)
    assert child[:8] != before[:8]
    # The parent goes on where it was.
    assert after[:8] == before[:8]
    assert (int(after[8:], 16) - int(before[8:], 16)) % 2**32 == 1
