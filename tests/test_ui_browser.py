"""The web view in a real browser (headless Chromium through selenium) against a real `wfctl ui`
and a real `wfctl work`: what a person sees, and that it stays current without a reload.

One browser for the module. Under CI=true a browser that cannot start fails the module.
Screenshots of the three pages go to test-artifacts/screenshots/.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest
from conftest import wait_until

from wfctl import Client

pytestmark = pytest.mark.process
REPO = Path(__file__).resolve().parent.parent
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage")
EVIL = "<script>window.pwned=1</script>"

HANDLERS = '''
def quick(state):
    return {"done": True}
'''
WORKFLOWS = """
version: 1
workflows:
  order:
    execution_timeout: 2h
    deadline: 1h
    steps:
      - activity: ui_handlers:quick
        name: reserve
        start_to_close: 1m
      - wait_for_signal: approved
      - activity: ui_handlers:quick
        name: ship
  late:
    deadline: 2s
    steps:
      - activity: ui_handlers:quick
        name: unserved
        queue: nobody
  patient:
    steps:
      - wait_for_signal: approved
        timeout: 1h
"""


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC",
                                                            "WFCTL_UI_TOKEN")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


class Ui:
    """A `wfctl ui` process and the address it printed."""

    def __init__(self, folder: Path, *options: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", "wfctl.db", "-w", "workflows.yaml", "ui",
             "--port", "0", *options], cwd=folder, env=environment(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, f"wfctl ui printed {line!r}; stderr: {self.process.stderr.read()}"
        self.url = found.group(0).rstrip("/")

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=10)
        return self.process.returncode, out


@pytest.fixture(scope="module")
def site():
    folder = Path(tempfile.mkdtemp(prefix="wfctl-ui-"))
    (folder / "ui_handlers.py").write_text(HANDLERS)
    (folder / "workflows.yaml").write_text(textwrap.dedent(WORKFLOWS))
    client = Client(folder / "wfctl.db", folder / "workflows.yaml")
    client.start("order", "order-1")
    worker = subprocess.Popen(
        [sys.executable, "-m", "wfctl", "--db", "wfctl.db", "-w", "workflows.yaml", "work",
         "--poll-interval", "50ms"], cwd=folder, env=environment(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers = {"read_only": Ui(folder), "actions": Ui(folder, "--allow-actions")}
    try:
        yield SimpleNamespace(folder=folder, client=client, servers=servers)
    finally:
        for server in servers.values():
            if server.process.poll() is None:
                server.stop()
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=20)
        client.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary:
            options.binary_location = binary
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        profile = tempfile.mkdtemp(prefix="wfctl-chromium-")
        options.add_argument(f"--user-data-dir={profile}")
        options.add_argument("--window-size=1280,1000")
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")),
                                  options=options)
    except Exception as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"headless Chromium cannot start: {exc}", pytrace=False)
        pytest.skip(f"headless Chromium cannot start: {exc}")
    driver.implicitly_wait(0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def visible_text(browser, css: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, css).text


def eventually(check, what: str, timeout: float = 10.0) -> None:
    wait_until(lambda: _quietly(check), what, timeout)


def _quietly(check) -> bool:
    try:
        return bool(check())
    except Exception:
        return False


def type_reason(browser, form: str, reason: str) -> bool:
    """Type `reason` into the form's reason field; True once the field holds it."""
    from selenium.webdriver.common.by import By

    field = browser.find_element(By.CSS_SELECTOR, f"{form} input[name=reason]")
    field.click()
    field.clear()
    field.send_keys(reason)
    return browser.find_element(By.CSS_SELECTOR, f"{form} input[name=reason]") \
        .get_attribute("value") == reason


def status_of(client: Client, instance_id: str) -> str:
    return client.describe(instance_id)["status"]


def test_the_list_shows_the_started_instances(site, browser):
    from selenium.webdriver.common.by import By

    client, servers = site.client, site.servers
    client.start("order", "order-2")
    browser.get(servers["read_only"].url + "/")
    links = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "table.instances a")]
    assert links[:2] == ["order-2", "order-1"]
    browser.save_screenshot(str(SCREENSHOTS / "list.png"))


def test_the_instance_page_draws_the_timeline_and_its_countdowns_tick(site, browser):
    from selenium.webdriver.common.by import By

    client, servers = site.client, site.servers
    wait_until(lambda: status_of(client, "order-1") == "waiting", "order-1 to wait")
    browser.get(servers["read_only"].url + "/instances/order-1")
    # Read in one call: the panel may be swapped in anew between two.
    titles = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg.timeline g.marker.deadline title'),"
        " (title) => title.textContent)")
    assert any(t.startswith("D deadline (must complete within): ") for t in titles), titles
    assert browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.bar.completed")
    assert "held while waiting" in visible_text(browser, "table.time")
    first = visible_text(browser, "table.time .countdown")
    assert re.fullmatch(r"in 1h 5\dm \d+s", first), first
    # Found afresh each time: an update the page polls for (the worker's lease renewed, say)
    # swaps the panel in anew.
    eventually(lambda: visible_text(browser, "table.time .countdown") != first,
               "the countdown to move", timeout=5)
    browser.save_screenshot(str(SCREENSHOTS / "instance.png"))
    browser.set_window_size(360, 800)
    try:
        assert browser.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth")
        browser.save_screenshot(str(SCREENSHOTS / "instance-360.png"))
    finally:
        browser.set_window_size(1280, 1000)


def test_a_step_completing_shows_in_an_open_page_without_a_reload(site, browser):
    client, servers = site.client, site.servers
    wait_until(lambda: status_of(client, "order-1") == "waiting", "order-1 to wait")
    browser.get(servers["read_only"].url + "/instances/order-1")
    browser.execute_script("window.stayed = 42")
    assert visible_text(browser, "#h-summary .status") == "waiting"
    client.signal("order-1", "approved")
    eventually(lambda: visible_text(browser, "#h-summary .status") == "completed",
               "the page to show order-1 completed")
    assert browser.execute_script("return window.stayed") == 42
    assert "ship" in visible_text(browser, "table.activities")
    browser.get(servers["read_only"].url + "/instances/order-1/history")
    assert "WorkflowCompleted" in visible_text(browser, "table.history")
    browser.save_screenshot(str(SCREENSHOTS / "history.png"))


def test_actions_are_refused_without_allow_actions_and_work_with_it(site, browser):
    from selenium.webdriver.common.by import By

    client, servers = site.client, site.servers
    client.start("order", "order-3")
    browser.get(servers["read_only"].url + "/instances/order-3")
    assert not browser.find_elements(By.CSS_SELECTOR, "form[method=post]")
    refused = urllib.request.Request(servers["read_only"].url + "/instances/order-3/pause",
                                     data=b"confirmed=yes", method="POST")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(refused)
    assert error.value.code == 405

    browser.get(servers["actions"].url + "/instances/order-3")
    browser.find_element(By.CSS_SELECTOR, "form[action$='/pause'] button").click()
    browser.switch_to.alert.accept()
    eventually(lambda: "Paused" in visible_text(browser, ".notice"), "the pause to be done")
    assert status_of(client, "order-3") == "paused"
    paused = [e for e in client.history("order-3") if e["event_type"] == "WorkflowPaused"]
    assert paused[0]["attributes"] == {"reason": "from the web view"}
    # The page swaps its actions in when an update it polls for comes in (the pause's own, say)
    # unless one of them is being edited: the reason is typed into whichever is there once it
    # holds still, and from then on the focus keeps it.
    eventually(lambda: type_reason(browser, "form[action$='/terminate']", "duplicate order"),
               "the terminate form to take a reason")
    browser.find_element(By.CSS_SELECTOR, "form[action$='/terminate'] button").click()
    browser.switch_to.alert.accept()
    eventually(lambda: status_of(client, "order-3") == "terminated", "order-3 to stop")
    stopped = client.history("order-3")[-1]
    assert stopped["event_type"] == "WorkflowTerminated"
    assert stopped["attributes"]["reason"] == "duplicate order (from the web view)"


def test_an_id_holding_a_script_runs_no_script(site, browser):
    client, servers = site.client, site.servers
    client.start("order", EVIL, input={"note": EVIL})
    browser.get(servers["read_only"].url + "/")
    browser.get(servers["read_only"].url + "/instances/" + quote(EVIL, safe=""))
    assert visible_text(browser, "h1 .id") == EVIL
    assert EVIL in visible_text(browser, "pre.state")
    assert browser.execute_script("return window.pwned === undefined")


def test_the_server_stops_cleanly_on_sigterm_and_ctrl_c(site):
    for stop in (signal.SIGTERM, signal.SIGINT):
        ui = Ui(site.folder)
        with urllib.request.urlopen(ui.url + "/api/instances") as response:
            assert response.status == 200
        ui.process.send_signal(stop)
        out, err = ui.process.communicate(timeout=10)
        assert ui.process.returncode == 0, err
        assert out.endswith("wfctl ui: stopped\n")
        assert "Traceback" not in err


def chart_box(browser, selector: str) -> dict[str, dict[str, float]]:
    """Where the chart's visible box is (its scrolling frame) and where `selector` in it is."""
    return browser.execute_script(
        "var frame = document.querySelector('figure.chart .scroll').getBoundingClientRect();"
        "var found = document.querySelector(arguments[0]);"
        "var box = found ? found.getBoundingClientRect() : null;"
        "return {frame: {left: frame.left, right: frame.right}, found: box &&"
        " {left: box.left, right: box.right, top: box.top, bottom: box.bottom}};", selector)


@pytest.fixture(scope="module")
def late(site) -> str:
    """An instance whose deadline fired two seconds in, which ended its run: the deadline it ran
    into is the chart's last instant."""
    site.client.start("late", "late-1")
    wait_until(lambda: status_of(site.client, "late-1") == "failed", "late-1 to fail",
               timeout=20)
    return "late-1"


def test_at_390_px_the_whole_run_fits_with_the_deadline_it_ran_into(site, browser, late):
    servers = site.servers
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": False})
    try:
        browser.get(servers["read_only"].url + "/instances/" + late)
        assert browser.execute_script("return window.innerWidth") == 390
        where = chart_box(browser, "svg.timeline g.marker.hit text")
        assert where["found"], "the deadline the run ran into is drawn"
        assert where["frame"]["left"] <= where["found"]["left"] < \
            where["found"]["right"] <= where["frame"]["right"], where
        assert browser.execute_script(
            "var frame = document.querySelector('figure.chart .scroll');"
            "return frame.scrollWidth <= frame.clientWidth"), "nothing to scroll to"
        browser.save_screenshot(str(SCREENSHOTS / "instance-390.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_the_line_of_the_deadline_that_was_hit_starts_under_its_letter(site, browser, late):
    browser.get(site.servers["read_only"].url + "/instances/" + late)
    # Read in one call: the page may swap its panel in anew (and move it) between two.
    letter, line = browser.execute_script(
        "var marker = document.querySelector('svg.timeline g.marker.hit');"
        "return [marker.querySelector('text').getBoundingClientRect().bottom,"
        " marker.querySelector('line').getBoundingClientRect().top];")
    assert line >= letter, (letter, line)


def test_a_waiting_instance_has_its_signal_wait_timeout_on_the_chart(site, browser):
    client, servers = site.client, site.servers
    client.start("patient", "patient-1")
    wait_until(lambda: status_of(client, "patient-1") == "waiting", "patient-1 to wait")
    browser.get(servers["read_only"].url + "/instances/patient-1")
    titles = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg.timeline g.mark.open title'),"
        " (title) => title.textContent)")
    assert any(t.startswith("w approved signal wait timeout: ") for t in titles), titles
    where = chart_box(browser, "svg.timeline g.mark.open text")
    assert where["frame"]["left"] <= where["found"]["left"] < \
        where["found"]["right"] <= where["frame"]["right"], where


def test_history_keeps_each_instant_on_one_line_at_1280_px(site, browser):
    client, servers = site.client, site.servers
    wait_until(lambda: status_of(client, "order-1") != "running", "order-1 to wait")
    browser.get(servers["read_only"].url + "/instances/order-1/history")
    assert browser.execute_script("return window.innerWidth") == 1280
    lines = browser.execute_script(
        "return Array.from(document.querySelectorAll("
        "'table.history time, table.history .instant-text'),"
        " (el) => [el.textContent, el.getClientRects().length])")
    assert len(lines) > len(client.history("order-1")), "the instants in the details too"
    assert [text for text, count in lines if count != 1] == []


def test_the_footer_names_local_time_once(site, browser):
    browser.get(site.servers["read_only"].url + "/")
    footer = visible_text(browser, "footer.bottom")
    assert re.fullmatch(r"now \S+\+00:00 · .+ local · read-only", footer), footer
    assert footer.count("local") == 1 and footer.count("UTC") + footer.count("+00:00") == 1


def test_the_next_tick_of_a_schedule_counts_down_and_its_ticks_show_live(browser):
    from selenium.webdriver.common.by import By

    # A folder of its own with no worker: the site's worker would start the ticks among the
    # instances the other tests count.
    folder = Path(tempfile.mkdtemp(prefix="wfctl-ui-schedules-"))
    (folder / "ui_handlers.py").write_text(HANDLERS)
    (folder / "workflows.yaml").write_text(textwrap.dedent(WORKFLOWS) + textwrap.dedent("""
        schedules:
          heartbeat:
            workflow: order
            every: 1h
        """))
    with Client(folder / "wfctl.db", folder / "workflows.yaml") as client:
        client.schedules()
    ui = Ui(folder)
    try:
        browser.get(ui.url + "/schedules")
        row = " ".join(visible_text(browser, "table.schedules tbody tr").split())
        assert row.startswith("heartbeat instances order Every 1h every 1h UTC "), row
        first = visible_text(browser, "table.schedules .countdown")
        # The countdown's words leave out a zero part: "in 20m" at a whole minute.
        assert re.fullmatch(r"in (1h|\d+m \d+s|\d+m|\d+s|\d+ms)|expired \d+s ago", first), first
        # The page's script moves each countdown once a second.
        eventually(lambda: visible_text(browser, "table.schedules .countdown") != first,
                   "the countdown to move", timeout=3)
        assert browser.find_element(By.LINK_TEXT, "instances").get_attribute("href") == \
            ui.url + "/?schedule=heartbeat"
        # A tick started elsewhere shows without a reload.
        with Client(folder / "wfctl.db", folder / "workflows.yaml") as client:
            [action] = client.trigger("heartbeat")
        eventually(lambda: f"started {action['instance_id']}" in
                   visible_text(browser, "table.schedules tbody tr"), "the tick to show")
        browser.save_screenshot(str(SCREENSHOTS / "schedules.png"))
    finally:
        ui.stop()
        shutil.rmtree(folder, ignore_errors=True)
