"""The Model Memory tab in headless Chromium, for the browser tests (tests/e2e/test_e2e_browser.py and
test_e2e_torch.py): ``Tab`` (a page of one TensorBoard) and ``TABLE_FIT``; Chromium itself is
tests/e2e/conftest.py's ``browser`` fixture."""

from __future__ import annotations

import os
import time

from tests.support.tensorboard_process import TensorBoardProcess

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
API = "/data/plugin/modelmem"
WAIT = 60_000  # ms; a cold TensorBoard decodes and reduces on first request


class Tab:
    """The Model Memory tab of one TensorBoard in a fresh page: its frame, console errors and API traffic."""

    def __init__(self, browser, tb: TensorBoardProcess, shots: str, height: int = 1000):
        self.page = browser.new_page(viewport={"width": 1400, "height": height})
        self.shots = shots
        self.errors, self.responses, self.requests = [], [], []
        self.in_flight, self.most_in_flight = {}, {}  # URL -> requests on the wire (now, at most)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", self._sent)
        self.page.on("requestfinished", self._done)
        self.page.on("requestfailed", self._done)
        self.page.on("response", lambda r: self.responses.append(r) if API in r.url else None)
        self.page.goto(f"{tb.url}/#modelmem", wait_until="domcontentloaded")
        self.page.locator("iframe").first.wait_for(timeout=WAIT)
        self.page.screenshot(path=os.path.join(shots, "first-paint.png"))  # lays the iframe out
        self.frame = self.page.frame_locator("iframe").first

    def _sent(self, request) -> None:
        if API in request.url and "/index.js" not in request.url:
            self.requests.append(request.url)
            self.in_flight[request.url] = self.in_flight.get(request.url, 0) + 1
            self.most_in_flight[request.url] = max(self.most_in_flight.get(request.url, 0), self.in_flight[request.url])

    def _done(self, request) -> None:
        if request.url in self.in_flight:
            self.in_flight[request.url] -= 1

    def testid(self, testid: str):
        return self.frame.locator(f'[data-testid="{testid}"]')

    def view(self, name: str) -> None:
        self.testid(f"view-{name}").click(timeout=WAIT)

    def pick(self, testid: str, wanted: str, exact: bool = False) -> None:
        """Select the option whose value is (or contains) `wanted` in a picker, once it has one: a
        picker fills in after the pick before it (a new run's tags come with its listing)."""
        select = self.testid(testid)
        select.wait_for(timeout=WAIT)
        deadline = time.monotonic() + WAIT / 1000
        while True:
            values = select.locator("option").evaluate_all("os => os.map(o => o.value)")
            found = [v for v in values if (v == wanted if exact else wanted in v)]
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert found, f"no option {wanted!r} in {testid}: {values}"
        select.select_option(found[0])

    def open(self, view: str, run: str, tag: str) -> None:
        """Show ``view`` of the item at (run, tag), picked as a user picks it, once it is shown."""
        self.view(view)
        self.pick("run-select", run, exact=True)
        self.pick("tag-select", tag, exact=True)
        self.shown(run, tag)

    def region(self, item: str = ""):
        """The shown view's item region (``.item-view``, ``item``: more of its selector): ``aria-busy`` while
        an item loads, ``data-run`` and ``data-tag`` the item its figures are."""
        return self.frame.locator(f".item-view{item}").filter(visible=True)

    def shown(self, run: str, tag: str | None = None) -> None:
        """Wait until the view shows the item at (run, tag) and loads nothing else: after a pick, the figures
        on the page may still be the item's before it, or hidden while the picked one loads."""
        item = f'[data-run="{run}"]' + (f'[data-tag="{tag}"]' if tag else "")
        self.region(f"{item}:not([aria-busy])").first.wait_for(timeout=WAIT)

    def text(self, testid: str, contains, timeout: int = WAIT) -> None:
        try:
            self.testid(testid).filter(has_text=contains).first.wait_for(timeout=timeout)
        except Exception:
            self.said_instead(testid, contains)
            raise

    def said_instead(self, testid: str, wanted) -> None:
        """What the tab showed where ``wanted`` never came (printed into the test's report, and a screenshot
        beside its others): a timeout alone does not say whether the view was loading, erred or showed another
        item."""
        self.page.screenshot(path=os.path.join(self.shots, f"never-{testid}.png"))
        shown = self.testid(testid).all_inner_texts() or "(none on the page)"
        status = [(r.status, r.url.split(API, 1)[-1]) for r in self.responses[-12:]]
        print(f"{testid!r} never showed {wanted!r}; it showed {shown}; the last answers {status}; "
              f"page errors {self.errors}; the frame said: {self.frame.locator('body').inner_text()[:3000]!r}")

    def hold(self, part: str) -> "Held":
        """Hold the tab's requests whose URL contains ``part`` until ``release()``: a slow answer, or one that
        comes after the user's next pick, in the same order on every machine."""
        return Held(self.page, part)

    def pick_held(self, part: str, testid: str, wanted: str) -> "Held":
        """Pick ``wanted`` in a picker with the requests whose URL contains ``part`` held, once one is: the
        answer the pick asked for has not come when this returns."""
        held = self.hold(part)
        self.pick(testid, wanted, exact=True)
        held.wait()
        return held

    def reload(self) -> None:
        """Ask for the runs again, as the tab's 20 s poll does, and wait until the answer is in."""
        with self.page.expect_response(lambda r: r.url.endswith(f"{API}/runs"), timeout=WAIT):
            self.testid("reload").click()
        self.page.wait_for_timeout(500)  # the listing is applied once its answer is parsed

    def filter(self, table: str, query: str) -> None:
        self.testid(f"{table}-filter").fill(query)

    def row(self, table: str, contains: str, timeout: int = WAIT):
        row = self.testid(table).locator('[role="row"]').filter(has_text=contains).first
        row.wait_for(timeout=timeout)
        return row

    def close(self) -> None:
        csp = [e for e in self.errors if "Content Security Policy" in e]
        self.page.close()
        assert not csp, csp


# In the frame: where a table is cut. Its scroller scrolls sideways when its columns overflow; an Output cell
# must show its byte figure whole (cut), and a one-output shape whole too (shapes_cut); the shapes of an op with
# several outputs (oneDNN's MaxPool: "[1,14,14,32];[6272] float32;uint8") may be cut, never without their whole
# text in the tooltip (untitled).
TABLE_FIT = """t => {
  const scroll = t.querySelector('.table-scroll').getBoundingClientRect();
  const right = (e) => e.getBoundingClientRect().right;
  const outputs = [...t.querySelectorAll('.table-row .cell')]
    .filter(c => c.querySelector('.badge.measured, .badge.derived'));
  return {
    sideways: t.querySelector('.table-scroll').scrollWidth - t.querySelector('.table-scroll').clientWidth,
    heads: [...t.querySelectorAll('.table-head button')].filter(b => right(b) > scroll.right + 0.5)
      .map(b => b.textContent),
    cut: outputs.filter(c => c.scrollWidth > c.clientWidth || !c.querySelector('.out-bytes')
      || right(c.querySelector('.out-bytes')) > right(c) + 0.5).map(c => c.textContent),
    shapes_cut: outputs.filter(c => [...c.querySelectorAll('.out-shape')]
      .some(e => e.scrollWidth > e.clientWidth && !e.textContent.includes(';')))
      .map(c => c.textContent),
    untitled: outputs.filter(c => [...c.querySelectorAll('.out-shape')]
      .some(e => e.scrollWidth > e.clientWidth
        && !(e.querySelector('[title]') || e).title.includes(e.textContent.trim())))
      .map(c => c.textContent),
  };
}"""


class Held:
    """Requests of one page held back (``Tab.hold``): the first ``wait()`` for, then all let through."""

    def __init__(self, page, part: str):
        self.page, self.part = page, part
        self.routes: list = []
        self.released = False
        page.route(lambda url: part in url, self._route)

    def _route(self, route) -> None:
        if self.released:
            route.continue_()
        else:
            self.routes.append(route)

    def wait(self) -> None:
        deadline = time.monotonic() + WAIT / 1000
        while not self.routes and time.monotonic() < deadline:
            self.page.wait_for_timeout(50)
        assert self.routes, f"no request for {self.part!r} was made"

    def release(self) -> None:
        """Let the held requests through and wait until their answers are in and applied."""
        self.released = True
        with self.page.expect_response(lambda r: self.part in r.url, timeout=WAIT):
            for route in self.routes:
                route.continue_()
        self.page.wait_for_timeout(500)  # applied once parsed
