"""The experiment docs/WHAT_IF.md reports under "Measured again where runs repeat": TensorFlow's BFC allocator
replayed over a traced step's requests, against real runs where they repeat (LeNet on one inter-op thread). Not
used by the product (What if does not replay BFC: this is why), kept so the figures can be made again:

    python -m tests.support.bfc_replay_experiment [--steps 6]

Each run is ``tests.support.projection_run`` (LeNet, Adam, profiled at its third step) in a fresh process with the
BFC CPU allocator and one inter-op thread; the child keeps the allocator events its profile was reduced from (each
allocation's and free's bytes, asked bytes, address and whether it carries the batch, in order). The model follows
``bfc_allocator.cc``: 256 B rounding, 21 bins, best fit (size, then address), a chunk split when it is at least
twice the request or 128 MiB over it, coalescing on free, regions from 2 MiB doubling (``allow_growth``).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from tb_modelmem.rules.caching_allocator import merged

_MIN, _MOST_OVER = 256, 128 << 20
LENET = [3200, 128, 204800, 256, 12845056, 4096, 40960, 40]  # LeNet's variables, in build order (bytes)


class _Chunk:
    __slots__ = ("address", "size", "used", "prev", "next")

    def __init__(self, address: int, size: int) -> None:
        self.address, self.size, self.used = address, size, False
        self.prev: Optional[_Chunk] = None
        self.next: Optional[_Chunk] = None


class BFC:
    """TensorFlow's best-fit-with-coalescing allocator; ``in_use`` and ``peak`` count chunks, as TensorFlow does."""

    def __init__(self) -> None:
        self.bins: List[List[Tuple[int, int, _Chunk]]] = [[] for _ in range(21)]
        self.region, self.top, self.in_use, self.peak = 2 << 20, 0, 0, 0

    @staticmethod
    def _bin(size: int) -> int:
        return min((size >> 8).bit_length() - 1, 20)

    def _insert(self, chunk: _Chunk) -> None:
        bisect.insort(self.bins[self._bin(chunk.size)], (chunk.size, chunk.address, chunk))

    def _remove(self, chunk: _Chunk) -> None:
        found = self.bins[self._bin(chunk.size)]
        found.pop(bisect.bisect_left(found, (chunk.size, chunk.address)))

    def _find(self, size: int) -> Optional[_Chunk]:
        for found in self.bins[self._bin(size):]:
            i = bisect.bisect_left(found, (size, -1))
            if i < len(found):
                chunk = found.pop(i)[2]
                if chunk.size >= 2 * size or chunk.size - size >= _MOST_OVER:
                    rest = _Chunk(chunk.address + size, chunk.size - size)
                    rest.prev, rest.next = chunk, chunk.next
                    if chunk.next is not None:
                        chunk.next.prev = rest
                    chunk.next, chunk.size = rest, size
                    self._insert(rest)
                return chunk
        return None

    def malloc(self, asked: int) -> _Chunk:
        size = max(_MIN, -(-asked // _MIN) * _MIN)
        chunk = self._find(size)
        if chunk is None:  # Extend: a new region, doubling unless this request made it grow
            grew = size > self.region
            while size > self.region:
                self.region *= 2
            self._insert(_Chunk(self.top, self.region))
            self.top += self.region + (1 << 44)
            self.region *= 1 if grew else 2
            chunk = self._find(size)
        assert chunk is not None
        chunk.used = True
        self.in_use += chunk.size
        self.peak = max(self.peak, self.in_use)
        return chunk

    def free(self, chunk: _Chunk) -> None:
        self.in_use -= chunk.size
        chunk.used = False
        for neighbour in (chunk.next, chunk.prev):
            if neighbour is not None and not neighbour.used:
                self._remove(neighbour)
                chunk = merged(chunk, neighbour) if neighbour is chunk.next else merged(neighbour, chunk)
        self._insert(chunk)


def replay(events: List[List[Any]], batch: float, steps: int) -> List[int]:
    """Each replayed step's peak: LeNet's weights made first, Adam's slots at the first update's first request,
    the window as a cycle (a free of a buffer from before it is the same-size buffer it keeps, a step on; one
    pairing none is the batch tf.data made before the step, made as each step starts)."""
    size = [int(e[2] * batch) if e[4] else e[2] for e in events]
    live: Dict[str, int] = {}
    before: List[int] = []
    for i, (delta, key, *_rest) in enumerate(events):
        if delta > 0:
            live[key] = i
        elif key in live:
            del live[key]
        else:
            before.append(i)
    kept = list(live.values())
    pair = {}
    for i in before:
        match = next((j for j in kept if events[j][2] == events[i][2]), None)
        if match is not None:
            kept.remove(match)
            pair[i] = match
    update = next(i for i, e in enumerate(events) if e[0] > 0 and e[5] and e[3] == "optimizer_temporaries")
    bfc = BFC()
    weights = {s: bfc.malloc(s) for s in LENET}
    carried = {i: weights[events[i][2]] for i in before if i in pair and events[i][2] in weights}
    peaks = []
    for step in range(steps):
        for i in before:
            if i not in pair:
                carried[i] = bfc.malloc(size[i])
        bfc.peak = bfc.in_use
        chunks: Dict[str, _Chunk] = {}
        made: Dict[int, _Chunk] = {}
        for i, (delta, key, *_rest) in enumerate(events):
            if step == 0 and i == update:
                for s in LENET * 2:
                    bfc.malloc(s)
            if delta > 0:
                chunks[key] = made[i] = bfc.malloc(size[i])
            elif key in chunks:
                bfc.free(chunks.pop(key))
            elif i in carried:
                bfc.free(carried.pop(i))
        peaks.append(bfc.peak)
        carried.update({i: made[j] for i, j in pair.items()})
    return peaks


def _child(out: str, argv: List[str]) -> None:
    """projection_run, with the allocator events its profile is reduced from written to ``out``: [delta, key,
    asked bytes, category, carries the batch, shape] each, in order."""
    from tb_modelmem.readers import xspace
    from tests.support import projection_run

    reduce = xspace.replay

    def kept(events: Any, *args: Any, **kwargs: Any) -> Any:
        with open(out, "w") as f:
            json.dump([[e.delta, str(e.key), e.requested, e.category, bool(e.batch), e.shape] for e in events], f)
        return reduce(events, *args, **kwargs)

    xspace.replay = kept
    sys.argv = ["projection_run", *argv]
    projection_run.main()


def _run(root: str, batch: int) -> Tuple[List[List[Any]], float]:
    """(The traced step's allocator events, TensorFlow's own peak over it) of one real LeNet run at ``batch``."""
    events, truth = os.path.join(root, f"events{batch}.json"), os.path.join(root, f"truth{batch}.json")
    env = dict(os.environ, TF_NUM_INTEROP_THREADS="1", TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run([sys.executable, "-m", "tests.support.bfc_replay_experiment", "--child", events,
                    os.path.join(root, f"run{batch}"), "lenet", str(batch), "--truth", truth],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    with open(events) as f, open(truth) as g:
        return json.load(f), json.load(g)["allocator_step_peak"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child[0], args.child[1:])
    with tempfile.TemporaryDirectory() as root:
        traced, peak = _run(root, 32)
        print(f"batch 32 traced: real peak {peak / 1e6:.2f} MB")
        for batch in (32, 64, 128):
            real = peak if batch == 32 else _run(root, batch)[1]
            replayed = replay([[e[0], e[1], e[2], e[3], e[4], e[5] not in ("", "[]")] for e in traced],
                              batch / 32, args.steps)
            print(f"batch {batch}: replayed steps 1-{args.steps} {', '.join(f'{p / 1e6:.2f}' for p in replayed)} MB; "
                  f"real {real / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
