"""Where the tab's items come from: one module per source, each listing its items and
locating one (run, tag, step, host) for the store to build.

- ``summaries``: payloads tb_modelmem wrote (breakdowns, op traces, load benchmarks, memory samples);
- ``run_metadata``: RunMetadata of TF1 log dirs (``FileWriter.add_run_metadata``) and TF2 ``trace_export``;
- ``profiles``: TF2 profiler sessions, ``<run>/plugins/profile/<session>/<host>.xplane.pb`` (and the
  ``memory_profile.json.gz`` TF 2.3-2.10 wrote), found by listing the log dir.
A new source is one module with a ``Source`` subclass, added to ``ModelMemPlugin._sources`` and its origin to
``plugin.PRECEDENCE`` (where the CLI would read its items among the others').
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from typing import Any, Callable, Dict, Hashable, List, Optional, Tuple

from tensorboard import errors
from tensorboard.data import provider

from tb_modelmem.plugin.store import Job, UnreadableError

MAX_NAME = 65536  # longest run or tag name a query may carry (TensorBoard keeps longer ones too)
MAX_STEPS = 100_000  # ask the provider for every step it kept
LISTING_SECONDS = 2.0  # the item listing, and each tag's steps, are reused this long (every request asks)
# Characters TensorBoard's Rust data server (--load_fast=true) cannot put in a blob key.
_BLOB_KEY_HOSTILE = ('"', "\\", "\t", "\n", "\r", "\x00")


@dataclasses.dataclass
class Item:
    """One thing the tab can show: a tag of a run, or a profile session of a run."""

    run: str
    tag: str
    kind: Optional[str]  # metadata.BREAKDOWN, OPS, LOADBENCH, MEMORY (None if unreadable)
    origin: str  # which source: "modelmem", "run_metadata", "profile"
    max_step: Optional[int] = None
    error: Optional[str] = None
    hosts: List[str] = dataclasses.field(default_factory=list)  # profile sessions: one file per host
    note: str = ""  # what it is, when the tag name does not say ("TF 2.3-2.10 memory profile")
    rank: int = 0  # its place among its run's items of its kind in its source, before the tag's name: preferred first

    def to_json(self) -> Dict[str, Any]:
        return {"tag": self.tag, "kind": self.kind, "origin": self.origin, "max_step": self.max_step,
                "error": self.error, "hosts": self.hosts, "note": self.note}


@dataclasses.dataclass
class Located:
    """One step of an item, ready to build: its cache key (it changes when the data does),
    the size of its input (what decides where it is built) and how to build it."""

    key: Hashable
    step: Optional[int]
    wall_time: Optional[float]
    input_bytes: int
    build: Callable[[Job], Any]


class Source:
    """Lists items and locates one of them; reading happens in ``Located.build``."""

    origin = ""
    stepped = True  # its items' steps are training steps (a file's 0 is no step: ``readers.pairing``)

    def list(self, ctx: Any, experiment: str) -> List[Item]:
        raise NotImplementedError

    def steps(self, ctx: Any, experiment: str, item: Item) -> List[Dict[str, Any]]:
        raise NotImplementedError

    def locate(self, ctx: Any, experiment: str, item: Item, step: Optional[int], host: Optional[str]) -> Located:
        raise NotImplementedError


def name_error(run: str, tag: str) -> Optional[str]:
    """Why a run or tag cannot be requested by name, if it cannot."""
    for what, name in (("run", run), ("tag", tag)):
        if len(name) > MAX_NAME:
            return (f"this {what} name is {len(name):,} characters long; "
                    f"the tab can request names of at most {MAX_NAME:,}")
    return None


class StepReader:
    """Every kept step of a blob-sequence tag from one data provider, each answer reused for
    LISTING_SECONDS as the item listing is: paging, sorting and filtering a table ask for the
    same tag's steps on every request (a gRPC call on ``--load_fast=true``), and a new step shows
    as soon as a new tag would."""

    _KEEP = 1024  # tags remembered (a few bytes each: steps, wall times, blob keys)

    def __init__(self, data_provider: provider.DataProvider) -> None:
        self._provider = data_provider
        self._recent: "collections.OrderedDict[Tuple[str, str, str, str], Tuple[float, list]]" = \
            collections.OrderedDict()
        self._lock = threading.Lock()

    def read(self, ctx: Any, experiment: str, plugin_name: str, run: str, tag: str
             ) -> List[provider.BlobSequenceDatum]:
        key = (experiment, plugin_name, run, tag)
        with self._lock:
            found = self._recent.get(key)
        if found is not None and time.monotonic() - found[0] < LISTING_SECONDS:
            return found[1]
        result = self._provider.read_blob_sequences(
            ctx, experiment_id=experiment, plugin_name=plugin_name, downsample=MAX_STEPS,
            run_tag_filter=provider.RunTagFilter(runs=[run], tags=[tag]))
        data = list(result.get(run, {}).get(tag, []))
        with self._lock:
            self._recent[key] = (time.monotonic(), data)
            self._recent.move_to_end(key)
            while len(self._recent) > self._KEEP:
                self._recent.popitem(last=False)
        return data


def pick_step(data: List[provider.BlobSequenceDatum], step: Optional[int], item: Item) -> provider.BlobSequenceDatum:
    """The datum at ``step`` (the latest if None); 404 if there is none."""
    if not data:
        raise errors.NotFoundError(f"no steps for run {item.run!r}, tag {item.tag!r}")
    if step is None:
        return data[-1]
    matches = [d for d in data if d.step == step]
    if not matches:
        raise errors.NotFoundError(f"no step {step} for run {item.run!r}, tag {item.tag!r}")
    return matches[-1]


def read_blob(data_provider: provider.DataProvider, ctx: Any, datum: provider.BlobSequenceDatum, item: Item,
              max_bytes: int) -> bytes:
    """The first blob of a datum, as a one-item error (never a 500) when it cannot be read."""
    where = f"{item.run}/{item.tag} step {datum.step}"
    if not datum.values:
        raise UnreadableError(f"{where}: empty summary (a tensor with no elements)")
    try:
        blob = data_provider.read_blob(ctx, blob_key=datum.values[0].blob_key)
    except errors.PublicError as e:
        if any(c in item.run + item.tag for c in _BLOB_KEY_HOSTILE):
            raise UnreadableError(
                f"{where}: TensorBoard's data server (--load_fast=true) cannot read runs or tags whose name "
                "holds a quote, backslash, tab, newline or NUL; rename the run or tag, or start TensorBoard "
                "with --load_fast=false") from None
        raise UnreadableError(f"{where}: TensorBoard could not read this summary ({e})") from None
    except (IndexError, KeyError, ValueError, TypeError) as e:  # a scalar string tensor, a foreign value
        raise UnreadableError(f"{where}: not a tb_modelmem summary (its tensor is not a list of blobs: "
                              f"{type(e).__name__})") from None
    if len(blob) > max_bytes:
        raise UnreadableError(f"{where}: {len(blob):,} bytes, over the {max_bytes:,}-byte limit for one summary")
    return blob
