"""Decoded and reduced items, kept within a byte budget, built at most once at a time.

Decoding a 200,000-op trace or reducing a 200 MB profile costs far more than reading it,
and a request must not pay it twice, nor pile up: each item is built by one job, which
concurrent requests share, off the request thread. Big inputs (by size) go to a single
worker, so one heavy reduction at a time bounds memory and
the request answers "reducing" (HTTP 202) with its progress instead of blocking; small ones by
two more, so a request waits at most SYNC_WAIT_SECONDS for any build. Failures are
remembered like results, so a decompression bomb costs its decode once, not once per poll.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import itertools
import sys
import threading
import time
from typing import Any, Callable, Dict, Hashable, Optional

from tensorboard import errors

DEFAULT_CACHE_BYTES = 512 * 2**20  # --modelmem_cache_mb
BACKGROUND_INPUT_BYTES = 4 * 2**20  # inputs at least this big are built by the background worker
SYNC_WAIT_SECONDS = 1.0  # a request waits this long for a background job before answering 202
MAX_FAILURES = 10_000


class UnreadableError(errors.PublicError):
    """This one item cannot be read (corrupt, foreign, too big, too new); the rest works."""

    http_code = 422

    def __init__(self, details: str):
        super().__init__(details)


class Pending(Exception):
    """The item is still being built; ``state()`` is the body of the 202 answer."""

    def __init__(self, job: "Job"):
        super().__init__("still reducing")
        self.job = job

    def state(self) -> Dict[str, Any]:
        return {"state": "reducing", "progress": round(self.job.progress, 3), "message": self.job.message,
                "elapsed_s": round(time.monotonic() - self.job.started, 1)}


@dataclasses.dataclass
class Job:
    """One build in progress; its function reports progress through ``report``."""

    future: "concurrent.futures.Future[Any]"
    started: float
    progress: float = 0.0
    message: str = ""

    def report(self, fraction: float, message: str = "") -> None:
        self.progress = max(0.0, min(1.0, fraction))
        if message:
            self.message = message


Build = Callable[[Job], Any]


class Store:
    """``get(key, build, input_bytes)``: the built value of ``key``, within ``max_bytes``."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, sync_wait: float = SYNC_WAIT_SECONDS,
                 background_input_bytes: int = BACKGROUND_INPUT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._sync_wait = sync_wait
        self._background_input = background_input_bytes
        self._values: "collections.OrderedDict[Hashable, Any]" = collections.OrderedDict()
        self._sizes: Dict[Hashable, int] = {}
        self._failures: "collections.OrderedDict[Hashable, errors.PublicError]" = collections.OrderedDict()
        self._jobs: Dict[Hashable, Job] = {}
        self._lock = threading.Lock()
        # Big inputs one at a time (bounded memory); the rest beside them, so one slow profile
        # never holds up the small items of the tab.
        self._heavy = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="modelmem-reduce")
        self._light = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="modelmem-decode")
        self.bytes = 0

    def get(self, key: Hashable, build: Build, input_bytes: int = 0) -> Any:
        """The value for ``key``: cached, built now (small input), or Pending (big input, still running).
        Raises the item's PublicError if building it failed (now or before)."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            if key in self._failures:
                raise self._failures[key]
            job = self._jobs.get(key)
            if job is None:
                job = self._start(key, build, background=input_bytes >= self._background_input)
        try:
            return job.future.result(timeout=self._sync_wait)
        except concurrent.futures.TimeoutError:
            raise Pending(job) from None

    def _start(self, key: Hashable, build: Build, background: bool) -> Job:
        """A job building ``key`` (called with the lock held)."""
        future: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        job = self._jobs[key] = Job(future, time.monotonic())

        def run() -> None:
            try:
                value = build(job)
            except errors.PublicError as e:
                self._finish(key, failure=e)
                future.set_exception(e)
            except Exception as e:  # a bug in a reducer must still be one item's error, not a 500 forever
                failure = UnreadableError(f"could not read this item ({type(e).__name__}: {str(e)[:200]})")
                self._finish(key, failure=failure)
                future.set_exception(failure)
            else:
                self._finish(key, value=value)
                future.set_result(value)

        (self._heavy if background else self._light).submit(run)
        return job

    def _finish(self, key: Hashable, value: Any = None, failure: Optional[errors.PublicError] = None) -> None:
        with self._lock:
            self._jobs.pop(key, None)
            if failure is not None:
                self._failures[key] = failure
                while len(self._failures) > MAX_FAILURES:
                    self._failures.popitem(last=False)
                return
            size = approx_size(value)
            if size > self.max_bytes:  # kept only by the requests already waiting for it
                return
            self._values[key] = value
            self._sizes[key] = size
            self.bytes += size
            while self.bytes > self.max_bytes:
                old, _ = self._values.popitem(last=False)
                self.bytes -= self._sizes.pop(old)

    def close(self) -> None:
        for pool in (self._heavy, self._light):
            pool.shutdown(wait=False, cancel_futures=True)


def approx_size(value: Any, sample: int = 16) -> int:
    """Bytes an object graph of dicts, lists, strings and numbers holds, estimated in
    O(containers): long lists and dicts are measured on a sample of their items, never copied."""
    seen: set = set()

    def size(obj: Any, depth: int) -> int:
        if id(obj) in seen or depth > 12:
            return 0
        seen.add(id(obj))
        total = sys.getsizeof(obj)
        if isinstance(obj, dict):
            n = len(obj)
            part = list(itertools.islice(obj.items(), sample))
            measured = sum(size(k, depth + 1) + size(v, depth + 1) for k, v in part)
            return total + (int(measured * n / len(part)) if part else 0)
        if isinstance(obj, (list, tuple)):
            n = len(obj)
            picks = range(0, n, max(1, n // sample)) if n > sample else range(n)
            sizes = [size(obj[i], depth + 1) for i in picks]
            return total + (int(sum(sizes) * n / len(sizes)) if sizes else 0)
        if isinstance(obj, (set, frozenset)):
            part = list(itertools.islice(obj, sample))
            return total + (int(sum(size(v, depth + 1) for v in part) * len(obj) / len(part)) if part else 0)
        if hasattr(obj, "__dict__") and not isinstance(obj, type):
            return total + size(vars(obj), depth + 1)
        return total

    return size(value, 0)
