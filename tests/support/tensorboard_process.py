"""A real `tensorboard` process on a log dir, for end-to-end tests (either loader)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterable, Optional, Tuple


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TensorBoardProcess:
    """Starts TensorBoard with our plugin installed; waits until the tab is active."""

    def __init__(self, logdir: str, load_fast: bool, reload_interval: int = 1, extra_args: Optional[list] = None):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = tempfile.NamedTemporaryFile(prefix="tensorboard-", suffix=".log", delete=False)
        args = [sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host", "127.0.0.1",
                "--port", str(self.port), f"--load_fast={'true' if load_fast else 'false'}",
                "--reload_interval", str(reload_interval), "--samples_per_plugin", "modelmem=0",
                *(extra_args or [])]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        self._proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        self.pid = self._proc.pid

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as response:
            return json.loads(response.read())

    def answer(self, route: str, **params: Any) -> Tuple[int, str]:
        """(status, body) of a tab route, waiting out 202 ("still reducing") answers as the tab does."""
        url = f"{self.url}/data/plugin/modelmem{route}?{urllib.parse.urlencode(params)}"
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    status, body = response.status, response.read().decode("utf-8", "replace")
            except urllib.error.HTTPError as e:
                status, body = e.code, e.read().decode("utf-8", "replace")
            if status != 202 or time.monotonic() > deadline:
                return status, body
            time.sleep(0.2)

    def wait_for_tab(self, timeout: float = 180.0, expect_tags: int = 1,
                     expect: Iterable[Tuple[str, str]] = ()) -> None:
        """Until the tab is active, lists ``expect_tags`` items and every (run, tag-or-kind) of
        ``expect`` (a loader lists a log dir progressively on its first pass)."""
        wanted = set(expect)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"tensorboard exited early:\n{self.log()}")
            try:
                listing = self.get("/data/plugins_listing")
                runs = self.get("/data/plugin/modelmem/runs")["runs"]
                listed = {(r["run"], t[field]) for r in runs for t in r["tags"] for field in ("tag", "kind")}
                if (listing.get("modelmem", {}).get("enabled") and sum(len(r["tags"]) for r in runs) >= expect_tags
                        and wanted <= listed):
                    return
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"modelmem tab not active after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        with open(self._log.name, errors="replace") as f:
            return f.read()[-5000:]

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        os.unlink(self._log.name)

    def __enter__(self) -> "TensorBoardProcess":
        return self

    def __exit__(self, *exc: Optional[BaseException]) -> None:
        self.stop()
