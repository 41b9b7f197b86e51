"""`flower web` in a real headless Chromium against live runs on the scripted model (issue #29).

Each run is `flower run` in a subprocess (the real CLI through the real SDK against `flower.testing`),
the server is `flower web RUN_DIR` in another, and the browser is Playwright driving Debian's Chromium.
The page is loaded once per test: everything it shows later came through its live stream, which the
`window.loadedOnce` marker (lost on any reload) proves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower import texts
from flower.testing import ScriptedAPI, text, tool_use
from tests.support.flowproc import FLOW, finish, flower, runs_json
from tests.support.web import Browser, WebServer, browser, chromium_browser, start_web, stop, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
__all__ = ["browser", "chromium_browser"]  # the fixtures, used by name

ASK_FLOW = """\
from flower import Step, Workflow
from flower.agent.roles import coordinator, worker
from flower.human import HumanChannel, open_mailbox

channel = HumanChannel(mailbox=open_mailbox({run_dir!r}), timeout_s=120, poll_s=0.1)
lead = coordinator("lead", "Goal: paint the shed.", {{"hands": worker("does the work", "You work.")}},
                   channel=channel)
flow = Workflow([Step("paint", lead, "Paint the shed.")], name="ask-flow")
"""
HOSTILE = '<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2">'


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    (tmp_path / "ws").mkdir()
    return path


@pytest.fixture
def web(run_dir: Path) -> Iterator[WebServer]:
    server = start_web(str(run_dir))
    yield server
    stop(server.process)


def open_page(b: Browser, url: str) -> Any:
    b.page.goto(url)
    b.page.evaluate("window.loadedOnce = true")
    return b.page


def still_loaded_once(page: Any) -> bool:
    return bool(page.evaluate("window.loadedOnce === true"))


def question_page(b: Browser, web: WebServer) -> Any:
    """The page of the one run in the list, once it shows the question the run waits on."""
    page = open_page(b, web.url)
    row = wait_until(lambda: page.query_selector("tr[data-run]"), "the run's row")
    page.goto(web.url.rstrip("/") + f"/runs/{row.get_attribute('data-run')}")
    page.evaluate("window.loadedOnce = true")
    wait_until(lambda: page.query_selector(".question .asked"), "the question", timeout=120)
    return page


def state_of(page: Any, run_id: str) -> str | None:
    row = page.query_selector(f'tr[data-run="{run_id}"]')
    return row.get_attribute("data-state") if row is not None else None


def test_the_runs_list_follows_a_run_live_as_its_steps_finish(
    scripted_api: ScriptedAPI, tmp_path: Path, run_dir: Path, web: WebServer, browser: Browser
) -> None:
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    scripted_api.script([text("ONE"), tool_use("Bash", {"command": "sleep 8"}), text("TWO"), text("THREE")])
    page = open_page(browser, web.url)
    wait_until(lambda: page.query_selector("#runs caption"), "the empty list")
    child = flower(env, "run", f"{tmp_path / 'flow.py'}:flow", "-w", str(tmp_path / "ws"), "-r", str(run_dir))
    try:
        row = wait_until(lambda: page.query_selector('tr[data-state="running"]'), "a running row")
        run_id = row.get_attribute("data-run")
        steps = lambda: page.inner_text(f'tr[data-run="{run_id}"] td.c-done')  # noqa: E731
        wait_until(lambda: steps() == "1/3", "step one done")
        wait_until(lambda: state_of(page, run_id) == "finished", "the run finished", timeout=120)
        assert steps() == "3/3"
        assert page.inner_text(f'tr[data-run="{run_id}"] td.c-context') not in ("", "-")
    finally:
        code, _, err = finish(child)
    assert code == 0, err
    assert still_loaded_once(page) and browser.problems == []


def test_a_question_answered_in_the_browser_is_the_asks_result(
    scripted_api: ScriptedAPI, tmp_path: Path, run_dir: Path, web: WebServer, browser: Browser
) -> None:
    (tmp_path / "flow.py").write_text(ASK_FLOW.format(run_dir=str(run_dir)))
    env = scripted_api.cli_env(tmp_path / "home")
    scripted_api.script([tool_use("mcp__human__ask", {"question": "Which colour?", "options": ["red", "blue"]}),
                         text("painting it blue")])
    child = flower(env, "run", f"{tmp_path / 'flow.py'}:flow", "-w", str(tmp_path / "ws"), "-r", str(run_dir))
    try:
        page = question_page(browser, web)
        assert page.inner_text(".question .asked") == "Which colour?"
        page.click('.question button.option:text("blue")')
        wait_until(lambda: "answered q1: Which colour?" in page.inner_text("#notice"), "the confirmation")
        wait_until(lambda: page.inner_text("#state") == "finished", "the run finished", timeout=120)
        wait_until(lambda: page.query_selector(".question") is None, "the question gone")
    finally:
        code, _, err = finish(child)
    assert code == 0, err
    assert scripted_api.main_requests[1].result_text() == texts.ASK_ANSWERED.format(answer="blue")
    wait_until(lambda: "painting it blue" in page.inner_text("#log"), "the reply in the log")
    assert still_loaded_once(page) and browser.problems == []


@pytest.fixture
def loose_api() -> Iterator[ScriptedAPI]:
    """The scripted API without the end-of-test check of its script (see the cancel test)."""
    api = ScriptedAPI().start()
    yield api
    api.stop()


def test_a_cancel_from_the_page_stops_the_run(
    loose_api: ScriptedAPI, tmp_path: Path, run_dir: Path, web: WebServer, browser: Browser
) -> None:
    scripted_api = loose_api
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    scripted_api.script([text("ONE"), tool_use("Bash", {"command": "sleep 6"}), text("TWO")])
    child = flower(env, "run", f"{tmp_path / 'flow.py'}:flow", "-w", str(tmp_path / "ws"), "-r", str(run_dir))
    try:
        page = open_page(browser, web.url)
        row = wait_until(lambda: page.query_selector("tr[data-run]"), "the run's row")
        page.goto(web.url.rstrip("/") + f"/runs/{row.get_attribute('data-run')}")
        page.evaluate("window.loadedOnce = true")
        wait_until(lambda: page.query_selector('li.step.state-running[data-step="two"]'), "step two running")
        points = lambda: int(page.get_attribute("#context", "data-points") or 0)  # noqa: E731
        # The curve holds step two's first API message while its Bash call still sleeps: it grows live.
        wait_until(lambda: points() == 2, "the in-flight step's message on the curve", timeout=5)
        assert page.query_selector('li.step.state-running[data-step="two"]') is not None
        assert page.query_selector("#context svg .plot circle") is not None
        page.click("#cancel")
        page.click("#cancel-yes")
        wait_until(lambda: "cancelled run" in page.inner_text("#notice"), "the confirmation")
        wait_until(lambda: page.inner_text("#state") == "cancelled", "the cancelled state", timeout=60)
        code, _, err = finish(child, timeout=120)
    finally:
        stop(child)
    # The process ends on the cancel: DBOS refuses the cancelled run's next checkpoint. Whether step three's
    # session starts before that is a race in the executor that `flower cancel` has too (noted on issue #29),
    # so this test's API is not held to its script.
    assert code == 1 and "was cancelled" in err, err
    (listed,) = runs_json(env, run_dir)
    assert listed["state"] == "cancelled" and listed["done"] < 3
    assert still_loaded_once(page) and browser.problems == []


def test_model_text_holding_markup_is_shown_as_text_and_runs_nothing(
    scripted_api: ScriptedAPI, tmp_path: Path, run_dir: Path, web: WebServer, browser: Browser
) -> None:
    (tmp_path / "spec.py").write_text('from flower import AgentSpec\nspec = AgentSpec(name="agent", '
                                      'instructions="Reply.", allowed_tools=["Read"])\n')
    env = scripted_api.cli_env(tmp_path / "home")
    scripted_api.script([text(f"here it is: {HOSTILE}")])
    code, _, err = finish(flower(env, "run", f"{tmp_path / 'spec.py'}:spec", "-w", str(tmp_path / "ws"),
                                 "-r", str(run_dir), "-p", f"show me {HOSTILE}"))
    assert code == 0, err
    (listed,) = runs_json(env, run_dir)
    page = open_page(browser, web.url.rstrip("/") + f"/runs/{listed['run_id']}")
    wait_until(lambda: HOSTILE in page.inner_text("#log"), "the reply shown as text")
    assert page.evaluate("window.pwned") is None
    assert page.query_selector("#log script, #log img, main script") is None
    assert page.inner_text("#log").count(HOSTILE) == 2  # the prompt and the reply, each as typed
    assert browser.problems == []


def test_an_unknown_run_is_a_404_page(web: WebServer, browser: Browser) -> None:
    response = browser.page.goto(web.url.rstrip("/") + "/runs/no-such-run")
    assert response is not None and response.status == 404
    assert browser.page.inner_text("#missing") == "unknown run no-such-run"
    response = browser.page.goto(web.url.rstrip("/") + "/nothing/here")
    assert response is not None and response.status == 404
    assert "no page at /nothing/here" in browser.page.inner_text("#missing")
    # Chromium logs each 404 document itself; nothing else may appear (the page's script ran clean).
    assert browser.problems == ["error: Failed to load resource: the server responded with a status of 404 "
                                "(Not Found)"] * 2


FAN = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You work on one item.", allowed_tools=["Read"])
fan = Workflow([Step("each", spec, "work on ITEM-{item}", over=[f"n{i}" for i in range(4)], limit=2)],
               name="fan")
"""


@pytest.mark.postgres
def test_a_fleet_run_on_postgresql_shows_the_machine_of_each_step(
    scripted_api: ScriptedAPI, tmp_path: Path, browser: Browser
) -> None:
    import re

    from tests.support.fleet import first_line, fleet_database
    from tests.support.fleet import flower as fleet_flower

    scripted_api.handler = lambda request: text("done " + re.findall(r"ITEM-(n\d)", request.text)[0], delay=3.0)
    (tmp_path / "flow.py").write_text(FAN)
    env = scripted_api.cli_env(tmp_path / "home")
    (tmp_path / "ws").mkdir()
    with fleet_database() as dsn:
        worker = fleet_flower(env, "worker", "--store", dsn, "--id", "w1", "-r", str(tmp_path / "worker-runs"))
        lead = web = None
        try:
            first_line(worker)
            lead = fleet_flower(env, "run", f"{tmp_path / 'flow.py'}:fan", "-w", str(tmp_path / "ws"), "-r",
                                str(tmp_path / "runs"), "--store", dsn, "--on-workers")  # every step on w1
            web = start_web(str(tmp_path / "runs"), "--store", dsn)
            page = open_page(browser, web.url)
            row = wait_until(lambda: page.query_selector("tr[data-run]"), "the run's row", timeout=120)
            wait_until(lambda: "w1" in page.inner_text(f'tr[data-run="{row.get_attribute("data-run")}"] '
                                                       "td.c-machines"), "the worker among the machines")
            page.goto(web.url.rstrip("/") + f"/runs/{row.get_attribute('data-run')}")
            wait_until(lambda: page.query_selector('li.step[data-machine="w1"]'), "a step on the worker")
            wait_until(lambda: page.inner_text("#state") == "finished", "the run finished", timeout=180)
            machines = [li.get_attribute("data-machine") for li in page.query_selector_all("li.step")]
            assert machines == ["w1"] * 4, machines  # each step names its machine: the worker's --id
            assert [li.get_attribute("class") for li in page.query_selector_all("li.step")] == ["step state-done"] * 4
        finally:
            for child in (worker, lead, web.process if web else None):
                if child is not None:
                    stop(child)
    assert browser.problems == []


def test_a_handoff_asked_in_the_browser_hands_the_run_over_with_its_focus(
    scripted_api: ScriptedAPI, tmp_path: Path, run_dir: Path, web: WebServer, browser: Browser
) -> None:
    """Steering from the page (issue #29, #27): the focus typed in the page reaches the handoff request at the
    run's next tool boundary, here the end of a question it waits on."""
    (tmp_path / "flow.py").write_text(ASK_FLOW.format(run_dir=str(run_dir)))
    env = scripted_api.cli_env(tmp_path / "home")
    scripted_api.script([tool_use("mcp__human__ask", {"question": "Go on?", "options": ["yes", "no"]}),
                         text("## Doing\nPainting the shed.\n## Next\n1. The second coat.\n"), text("done")])
    child = flower(env, "run", f"{tmp_path / 'flow.py'}:flow", "-w", str(tmp_path / "ws"), "-r", str(run_dir))
    try:
        page = question_page(browser, web)
        page.fill("#mail", "the second coat first")
        page.click("#handoff")
        wait_until(lambda: "to hand over at its next tool boundary" in page.inner_text("#notice"), "the confirmation")
        page.click('.question button.option:text("yes")')
        wait_until(lambda: page.inner_text("#state") == "finished", "the run finished", timeout=120)
    finally:
        code, _, err = finish(child)
    assert code == 0, err
    asked = scripted_api.main_requests[1].text
    assert "## Doing" in asked and "the second coat first" in asked
    assert still_loaded_once(page) and browser.problems == []
