"""`wfctl signal` refuses a name the instance's type never waits for (unless --force), and
`describe` shows the signals received but not yet consumed."""

from __future__ import annotations

import json
import re

import pytest

from wfctl import clock
from wfctl.errors import InvalidInput

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  order:
    steps:
      - activity: wfh:noop
        name: pack
      - wait_for_signal: shipped
        timeout: 1h
      - parallel:
          - activity: wfh:noop
            name: bill
          - workflow: confirm
  confirm:
    steps:
      - wait_for_signal: confirmed
  plain:
    steps:
      - delay: 1h
"""



@pytest.fixture
def env(make_env):
    """o-2 (order) has packed and waits for `shipped`; p-1 (plain) waits out a delay."""
    env = make_env(DEFINITIONS)
    env.start("order", "o-2")
    env.start("plain", "p-1")
    env.run(0)
    assert env.describe("o-2")["run"]["wait_kind"] == "signal"
    return env


def test_a_mistyped_signal_is_refused_naming_the_ones_the_type_waits_for(env, wfctl):
    events = env.history("o-2")

    code, out, err = wfctl(env, "signal", "o-2", "shiped")

    assert (code, out) == (1, "")
    assert err == ("Error: o-2 (order) has no wait_for_signal step for 'shiped': its type "
                   "waits for shipped (--force delivers it anyway)\n")
    assert env.history("o-2") == events
    assert env.describe("o-2")["pending_signals"] == []


def test_a_type_that_waits_for_no_signal_says_so(env, wfctl):
    code, _, err = wfctl(env, "signal", "p-1", "go", "--data", '{"x": 1}')

    assert code == 1
    assert err == ("Error: p-1 (plain) has no wait_for_signal step for 'go': its type waits "
                   "for no signal (--force delivers it anyway)\n")
    assert env.event_types("p-1").count("SignalReceived") == 0


def test_the_signals_a_type_waits_for_are_those_of_its_own_steps(env, wfctl):
    # `confirmed` is waited for by the child type, not by order itself.
    code, _, err = wfctl(env, "signal", "o-2", "confirmed")

    assert code == 1 and "its type waits for shipped " in err


def test_force_delivers_it_and_describe_shows_it_pending(env, wfctl):
    code, out, err = wfctl(env, "signal", "o-2", "shiped", "--force")

    assert (code, out, err) == (0, "Signal shiped buffered to o-2\n", "")
    [received] = env.events("o-2", "SignalReceived")
    assert received["attributes"]["signal"] == "shiped"
    code, out, _ = wfctl(env, "describe", "o-2", "--json")
    assert json.loads(out)["pending_signals"] == [
        {"name": "shiped", "received_at": clock.iso(received["at"])}]
    code, out, _ = wfctl(env, "describe", "o-2")
    assert code == 0
    section = out[out.index("\nSignals"):out.index("\nState")]
    assert "received, not yet consumed" in section
    assert re.search(rf"shiped\s+{re.escape(clock.iso(received['at']))}\s+", section)


def test_a_consumed_signal_is_no_longer_pending(env, wfctl):
    assert env.describe("o-2")["pending_signals"] == []
    # Before the wait's timeout (the CLI would deliver it at the wall clock's now).
    env.clock.set(1)
    assert env.client.signal("o-2", "shipped", {"carrier": "dhl"})["buffered"] is False
    assert [s["name"] for s in env.describe("o-2")["pending_signals"]] == ["shipped"]

    env.decide(1)

    doc = env.describe("o-2")
    assert doc["pending_signals"] == []
    assert doc["state"]["carrier"] == "dhl"
    _, out, _ = wfctl(env, "describe", "o-2")
    assert "\nSignals" not in out


def test_the_api_refuses_it_too_unless_forced(env):
    with pytest.raises(InvalidInput) as caught:
        env.client.signal("o-2", "shiped")
    # The library's error names the library's parameter; only the CLI's names --force.
    assert str(caught.value) == ("o-2 (order) has no wait_for_signal step for 'shiped': its "
                                 "type waits for shipped (force=True delivers it anyway)")
    assert env.client.signal("o-2", "shiped", force=True)["buffered"] is True
    assert env.client.signal_names("o-2") == ("shipped",)
