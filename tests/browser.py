"""A small W3C WebDriver client for Debian's chromium and chromium-driver: enough to load a
page, run a script in it, click, cut the network and take a screenshot. Run as a script it
writes the screenshots of the review pages that docs/design-review.md shows.

The browser runs headless with a fresh profile and every background connection off, so it
starts on a machine with no network at all.
"""

import base64
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = "apt-get install -y chromium chromium-driver fonts-noto-cjk"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars")


class BrowserMissing(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Browser:
    """One headless Chromium session through chromedriver on a loopback port."""

    def __init__(self, width: int = 1280, height: int = 1000) -> None:
        for program in (CHROMIUM, CHROMEDRIVER):
            if not Path(program).exists():
                raise BrowserMissing(f"{program} is missing: the page tests need Debian's "
                                     f"chromium and chromium-driver ({INSTALL})")
        self.profile = tempfile.mkdtemp(prefix="ctxspec-chromium-")
        self.url = f"http://127.0.0.1:{_free_port()}"
        self.process = subprocess.Popen([CHROMEDRIVER, f"--port={self.url.rsplit(':', 1)[1]}"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self._wait_ready()
            options = {"binary": CHROMIUM, "args": [*FLAGS, f"--user-data-dir={self.profile}",
                                                    f"--window-size={width},{height}"]}
            answer = self._call("POST", "/session", {"capabilities": {"alwaysMatch": {
                "browserName": "chrome", "goog:chromeOptions": options}}})
            self.session = f"/session/{answer['sessionId']}"
        except BaseException:
            self.close()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if self._call("GET", "/status").get("ready"):
                    return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.05)
        raise BrowserMissing("chromedriver did not start within 15 s")

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"webdriver {method} {path}: {error.read().decode()}") from None

    def open(self, page: Path) -> None:
        self._call("POST", f"{self.session}/url", {"url": page.resolve().as_uri()})

    def run(self, script: str, *args: Any) -> Any:
        """A script's return value (the script is a function body)."""
        return self._call("POST", f"{self.session}/execute/sync",
                          {"script": script, "args": list(args)})

    def click(self, css: str) -> None:
        element = self._call("POST", f"{self.session}/element",
                             {"using": "css selector", "value": css})
        self._call("POST", f"{self.session}/element/{next(iter(element.values()))}/click", {})

    def offline(self) -> None:
        """Cut the network for every later load (Chromium's network emulation)."""
        self._call("POST", f"{self.session}/chromium/network_conditions", {
            "network_conditions": {"offline": True, "latency": 0, "download_throughput": 0,
                                   "upload_throughput": 0}})

    def resize(self, width: int, height: int) -> None:
        self._call("POST", f"{self.session}/window/rect", {"width": width, "height": height})

    def screenshot(self, target: Path, width: int = 1280, height: int | None = None) -> None:
        """The whole page, as tall as it is; or its top, in a window ``height`` tall."""
        if height is None:
            height = int(self.run("return document.documentElement.scrollHeight;"))
        self.resize(width, height)
        png = self._call("GET", f"{self.session}/screenshot")
        target.write_bytes(base64.b64decode(png))

    def close(self) -> None:
        try:
            if hasattr(self, "session"):
                self._call("DELETE", self.session)
        finally:
            self.process.terminate()
            self.process.wait(timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)


CRASH = {"commit": "CHUNK_COMMITTED", "occurrence": 2, "when": "after"}
"""The crash docs/design-review.md shows: the process dies right after the second chunk of the
compaction example is committed."""


def replayed(example: Path, crash: dict[str, Any] | None = None
             ) -> tuple[Any, list[dict[str, Any]]]:
    """A scenario file (with ``crash`` put in, when given) and the trace of its replay on the
    reference runtime."""
    from ctxspec.conformance.driver import ReferenceDriver, run_scenario
    from ctxspec.conformance.scenario import parse_scenario

    document = json.loads(example.read_text("utf-8"))
    if crash is not None:
        document["crash"] = crash
    scenario = parse_scenario(document)
    driver = ReferenceDriver()
    run_scenario(scenario, lambda: driver)
    trace: list[dict[str, Any]] = driver.trace()
    return scenario, trace


REPORT_DRIVER = "ctxspec.adapters.langchain:make_driver"
"""The driver whose report docs/design-review.md shows: a real runtime (LangChain, the best
configuration of docs/compatibility/langchain.md) whose failures print replay commands that load
it, as a runtime team would see its own."""

REPORT_HEIGHT = 1600
"""The report picture is the top of the page, the verdict and the first failures: the whole page
of a runtime with a hundred failures is tens of thousands of pixels tall."""


def report_command(page: Path, *cases: str) -> list[str]:
    """The command docs/design-review.md prints for the report's picture, writing ``page`` (with
    ``cases``, only those)."""
    selected = [word for case in cases for word in ("--case", case)]
    return ["ctxspec", "conformance", "--driver", REPORT_DRIVER, *selected, "--html", str(page)]


def write_report(page: Path, *cases: str) -> None:
    """Runs :func:`report_command` as a user would, with the ctxspec of this interpreter; it
    exits 1 because the runtime fails cases, any other exit is a broken run."""
    command = report_command(page, *cases)
    done = subprocess.run([sys.executable, "-m", "ctxspec", *command[1:]],
                          capture_output=True, text=True, check=False)
    if done.returncode != 1 or not page.exists():
        raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}\n"
                           f"{done.stdout[-2000:]}{done.stderr[-2000:]}")


def screenshots(target: Path, which: tuple[str, ...] = ("replay", "report")) -> list[Path]:
    """The pictures docs/design-review.md shows: each worked example's replay page and the
    crash's (``replay``), and the top of the report of :data:`REPORT_DRIVER` over the whole
    suite (``report``)."""
    written = []
    browser = Browser()
    try:
        with tempfile.TemporaryDirectory() as work:
            if "replay" in which:
                written += _replay_pictures(browser, Path(work), target)
            if "report" in which:
                page = Path(work) / "report.html"
                write_report(page)
                browser.open(page)
                written.append(target / "conformance-report.png")
                browser.screenshot(written[-1], height=REPORT_HEIGHT)
    finally:
        browser.close()
    return written


def _replay_pictures(browser: Browser, work: Path, target: Path) -> list[Path]:
    from ctxspec.conformance.replay_page import write_replay_page

    root = Path(__file__).resolve().parent.parent
    written = []
    for example in sorted((root / "docs" / "examples").glob("*.json")):
        page = work / f"{example.stem}.html"
        write_replay_page(page, *replayed(example))
        browser.open(page)
        browser.run("document.querySelectorAll('details.request').forEach(d => "
                    "{ d.open = d.querySelector('tr.changed') !== null; });")
        written.append(target / f"replay-{example.stem}.png")
        browser.screenshot(written[-1])
    page = work / "crash.html"
    example = root / "docs" / "examples" / "compaction-three-chunks-window-exceeded.json"
    write_replay_page(page, *replayed(example, CRASH))
    browser.open(page)
    written.append(target / "replay-crash-takeover.png")
    browser.screenshot(written[-1])
    return written


if __name__ == "__main__":
    # ``python -m tests.browser [replay | report]``: every picture, or only the replay pages'
    # (seconds) or only the report's (the whole suite on the LangChain adapter, ~30 s).
    chosen = tuple(sys.argv[1:]) or ("replay", "report")
    if not set(chosen) <= {"replay", "report"}:
        sys.exit("usage: python -m tests.browser [replay | report]")
    for path in screenshots(Path(__file__).resolve().parent.parent / "docs" / "images", chosen):
        print(path)
