"""The database server's clock as wfctl reads it (SPEC §2): sampled, carried forward on this
host's monotonic clock, never stepping backwards."""

from __future__ import annotations

from datetime import timedelta

import pytest
from conftest import T0, at

from wfctl.clock import ServerClock
from wfctl.errors import StoreUnavailable


class Host:
    """A monotonic clock moved by hand, and a server whose answers the test gives."""

    def __init__(self) -> None:
        self.tick = 100.0
        self.answers: list[object] = []
        self.samples = 0

    def monotonic(self) -> float:
        return self.tick

    def sample(self):
        self.samples += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def host() -> Host:
    return Host()


def test_the_servers_time_is_carried_forward_between_samples(host):
    clock = ServerClock(host.sample, every=60, monotonic=host.monotonic)
    host.answers = [at(0)]

    first = clock.now()
    host.tick += 2.5
    later = clock.now()

    assert (first, later, host.samples) == (at(0), at(2.5), 1)


def test_it_is_sampled_again_after_a_while_and_never_steps_backwards(host):
    clock = ServerClock(host.sample, every=60, monotonic=host.monotonic)
    host.answers = [at(0), at(58.5)]    # by the second sample, this host ran 1.5 s fast
    clock.now()
    host.tick += 59
    assert clock.now() == at(59)
    host.tick += 1

    assert clock.now() == at(59)        # not at(58.5): never before an instant already given
    assert host.samples == 2
    host.tick += 1
    assert clock.now() == at(59.5)


def test_a_failed_sample_carries_the_last_one_on_and_is_tried_again_later(host):
    clock = ServerClock(host.sample, every=60, monotonic=host.monotonic)
    host.answers = [at(0), StoreUnavailable("unreachable", "down"), at(130)]
    clock.now()
    host.tick += 60

    assert clock.now() == at(60)
    host.tick += 30
    assert (clock.now(), host.samples) == (at(90), 2)
    host.tick += 30
    assert (clock.now(), host.samples) == (at(130), 3)


def test_a_first_sample_that_fails_is_raised_and_tried_again_at_once(host):
    clock = ServerClock(host.sample, every=60, monotonic=host.monotonic)
    host.answers = [StoreUnavailable("unreachable", "down"), T0 + timedelta(milliseconds=1.7)]

    with pytest.raises(StoreUnavailable):
        clock.now()
    assert clock.now() == T0 + timedelta(milliseconds=1)
