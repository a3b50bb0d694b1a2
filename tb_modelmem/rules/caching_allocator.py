"""PyTorch's CUDA caching allocator, modelled, to replay a traced step's requests at another setting: what it
reserves from the device (segments), which an out-of-memory error counts, beside the tensors' bytes. No torch.

The rules are ``c10/cuda/CUDACachingAllocator.cpp``'s with its defaults (no ``max_split_size_mb``, no
expandable segments, one stream: a free another stream still uses is not held back): a request is rounded up to
512 B; up to 1 MiB it is served from the small pool, whose segments are 2 MiB, else from the large pool, whose
segments are 20 MiB for requests under 10 MiB and the request rounded up to 2 MiB from there; the smallest cached
block that fits is taken (best fit), and split when what is left is at least 512 B (small pool) or over 1 MiB
(large); a freed block merges with free neighbours of its segment. Segments are kept; only when a new one would
not fit the device are the wholly free ones given back first, and the request tried again (``limit``).

A trace's window is one step, cut anywhere: the buffers it frees that were made before it are the ones the
step leaves for the next (last step's gradients, say), so the step is replayed as a cycle, each of them paired
with an allocation the window makes and never frees (of the same size first, then in order). The history before
is not in the trace; the replay starts cold: what the window held throughout first (the weights), one step with
the optimizer's state made where its update starts (``torch.optim`` makes it on the first ``step()``), then
steady steps.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import math
from typing import Any, Callable, Deque, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from tb_modelmem.rules.buffers import shape_dims
from tb_modelmem.schema.dtypes import item_bytes
from tb_modelmem.schema.names import OPTIMIZER_TEMPORARIES_CATEGORY

MIN_BLOCK = 512  # kMinBlockSize: every request is rounded up to a multiple of it
SMALL_SIZE = 1 << 20  # kSmallSize: requests up to this are the small pool's
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small-pool segment
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc: from here a segment is the request rounded to ROUND_LARGE
ROUND_LARGE = 2 << 20  # kRoundLarge
LARGE_BUFFER = 20 << 20  # kLargeBuffer: a large-pool segment for a request under MIN_LARGE_ALLOC
STEPS = 3  # replayed: the first (history: the state made), then two steady ones (the figure is the last's)
MAX_REQUESTS = 100_000  # a plan longer is refused (a crafted trace): a replay of this many takes 0.3-1.5 s
_ALLOC, _FREE, _FREE_CARRIED = 0, 1, 2  # a plan's request kinds: made, freed (by index), made before the window


def round_size(size: int) -> int:
    return MIN_BLOCK if size < MIN_BLOCK else -(-size // MIN_BLOCK) * MIN_BLOCK


def segment_size(size: int) -> int:
    """The segment ``cudaMalloc``'d when no cached block fits a request of ``size`` (rounded) bytes."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    return LARGE_BUFFER if size < MIN_LARGE_ALLOC else -(-size // ROUND_LARGE) * ROUND_LARGE


class _Block:
    __slots__ = ("address", "size", "small", "used", "prev", "next")

    def __init__(self, address: int, size: int, small: bool) -> None:
        self.address, self.size, self.small, self.used = address, size, small, False
        self.prev: Optional[_Block] = None
        self.next: Optional[_Block] = None


class OutOfMemory(Exception):
    """A request no cached block fits, whose segment would pass the device's memory even with the cache emptied."""


class CachingAllocator:
    """The allocator's blocks and segments; ``allocated`` and ``reserved`` are its counters, as torch reports them
    ("Total Allocated", "Total Reserved"); ``limit``: the device's memory, where a new segment may not go past it."""

    def __init__(self, limit: Optional[int] = None) -> None:
        self._pools: Dict[bool, List[Tuple[int, int, _Block]]] = {True: [], False: []}  # small? -> (size, address)
        self._top = 0
        self.limit = limit
        self.allocated = self.reserved = self.peak = 0

    def malloc(self, size: int) -> _Block:
        size = round_size(size)
        small = size <= SMALL_SIZE
        pool = self._pools[small]
        i = bisect.bisect_left(pool, (size, -1))
        block = pool.pop(i)[2] if i < len(pool) else self._segment(size, small)
        rest = block.size - size
        splits = rest >= MIN_BLOCK if small else rest > SMALL_SIZE
        if splits:
            tail = _Block(block.address + size, rest, small)
            tail.prev, tail.next = block, block.next
            if block.next is not None:
                block.next.prev = tail
            block.next, block.size = tail, size
            bisect.insort(pool, (tail.size, tail.address, tail))
        block.used = True
        self.allocated += block.size
        self.peak = max(self.peak, self.allocated)
        return block

    def _segment(self, size: int, small: bool) -> _Block:
        """A new segment for a request of ``size`` (``cudaMalloc``); past ``limit``, the cache emptied first."""
        wanted = segment_size(size)
        if self.limit is not None and self.reserved + wanted > self.limit:
            for pool in self._pools.values():  # release_cached_blocks: every segment wholly free is given back
                whole = [entry for entry in pool if entry[2].prev is None and entry[2].next is None]
                for entry in whole:
                    pool.remove(entry)
                    self.reserved -= entry[2].size
            if self.reserved + wanted > self.limit:
                raise OutOfMemory(size)
        address, self._top = self._top, self._top + wanted + (1 << 44)  # apart: blocks never merge across segments
        self.reserved += wanted
        return _Block(address, wanted, small)

    def free(self, block: _Block) -> None:
        self.allocated -= block.size
        block.used = False
        small = block.small
        for neighbour in (block.prev, block.next):
            if neighbour is not None and not neighbour.used:
                self._take(neighbour, small)
                block = merged(neighbour, block) if neighbour is block.prev else merged(block, neighbour)
        bisect.insort(self._pools[small], (block.size, block.address, block))

    def _take(self, block: _Block, small: bool) -> None:
        pool = self._pools[small]
        pool.pop(bisect.bisect_left(pool, (block.size, block.address)))


def merged(first: Any, second: Any) -> Any:
    """``first`` grown by ``second``, its free neighbour after it in one segment, which leaves the list (a block's
    ``size``, ``prev`` and ``next``: the same for TensorFlow's BFC chunks, ``tests/support/bfc_replay_experiment``)."""
    first.size += second.size
    first.next = second.next
    if second.next is not None:
        second.next.prev = first
    return first


class Replayed(NamedTuple):
    allocated: int  # the highest bytes allocated in the last step replayed
    reserved: int  # the bytes reserved after it (where it ran out of memory: when it did)
    out_of_memory: bool  # a request would have passed ``limit``
    unpaired: int  # buffers the window left or found that no same-size one pairs a step on (paired in order)


def plan_of(events: Sequence[Any], device: str) -> Optional[Dict[str, Any]]:
    """What ``replay`` needs of one device's allocator events (``readers.allocator_replay.Event``s, in time
    order), or None where its allocator is not a caching one (no "Total Reserved": a CPU). ``requests``: a flat
    list of (kind, value, carries) triples: made, of ``value`` bytes asked (``_asked``), carrying the batch (bit
    0) and the sequence so many times (the bits above); freed, ``value`` the index of its making; or freed having
    been made before the window, ``value`` the index of the making in the window that is that buffer a step on
    (``_pairs``; -1: none). ``resident_bytes``: held all window; ``update_at``: the first request of the optimizer's
    update (none in the window: its end); ``unpaired``: buffers paired by order, not by size, or not at all."""
    mine = [e for e in events if e.allocator == device]
    if not mine or not any(e.reserved for e in mine):
        return None
    if len(mine) > MAX_REQUESTS:  # kept as a count, so the answer says why it has no figure
        return {"requests": [], "resident_bytes": 0, "update_at": 0, "left_out": len(mine)}
    requests: List[int] = []
    made: Dict[Any, int] = {}  # a live buffer's key -> its making's index
    blocks: List[int] = []  # each making's block
    freed: Set[int] = set()
    update_at: Optional[int] = None
    for e in mine:
        if e.delta > 0:
            if update_at is None and e.category == OPTIMIZER_TEMPORARIES_CATEGORY:
                update_at = len(requests) // 3
            made[e.key] = len(blocks)
            blocks.append(e.delta)
            requests += [_ALLOC, _asked(e.delta, e.shape, e.dtype), int(e.batch) | min(e.seq, 2) << 1]
        elif e.key in made:
            freed.add(made[e.key])
            requests += [_FREE, made.pop(e.key), 0]
        else:
            requests += [_FREE_CARRIED, -e.delta, 0]  # its bytes, for ``_pairs``
    carried_in = sum(requests[i + 1] for i in range(0, len(requests), 3) if requests[i] == _FREE_CARRIED)
    unpaired = _pairs(requests, [(index, size) for index, size in enumerate(blocks) if index not in freed])
    first = mine[0]
    start = (first.in_use or 0) - first.delta
    return {"requests": requests, "resident_bytes": max(int(start) - carried_in, 0), "unpaired": unpaired,
            "update_at": len(requests) // 3 if update_at is None else update_at}


def _pairs(requests: List[int], kept: List[Tuple[int, int]]) -> int:
    """Each free of a buffer made before the window (its bytes in ``requests``) is given the making in the window
    that is that buffer a step on, of those never freed (``kept``: (index, block bytes)): of the same bytes in order,
    then the rest in order; how many were paired by order or not at all."""
    by_size: Dict[int, Deque[int]] = collections.defaultdict(collections.deque)
    for index, size in kept:
        by_size[size].append(index)
    frees = [i for i in range(0, len(requests), 3) if requests[i] == _FREE_CARRIED]
    unmatched = []
    for i in frees:
        queue = by_size.get(requests[i + 1])
        if queue:
            requests[i + 1] = queue.popleft()
        else:
            unmatched.append(i)
    rest = sorted(index for queue in by_size.values() for index in queue)
    for i, index in itertools.zip_longest(unmatched, rest[:len(unmatched)], fillvalue=-1):
        requests[i + 1] = index
    return len(unmatched) + max(len(rest) - len(unmatched), 0)


def _asked(block: int, shape: str, dtype: str) -> int:
    """The bytes a block was made for: torch's profiler reports the block, which is the request rounded to 512 B, or
    a large segment's tail handed with it (up to 1 MiB over); the buffer's shape says the request, where it fits."""
    dims = shape_dims(shape)
    asked = math.prod(dims) * item_bytes(dtype) if dims else 0
    if asked <= 0 or round_size(asked) > block:
        return block
    return asked if block == round_size(asked) or (asked > SMALL_SIZE and block - round_size(asked) <= SMALL_SIZE) \
        else block


def requests_in(plan: Dict[str, Any]) -> int:
    """How many requests the window made (a plan too long to keep holds only the count): over ``MAX_REQUESTS``,
    ``replay`` refuses it."""
    left_out = plan.get("left_out")
    return max(len(plan["requests"]) // 3, left_out if type(left_out) is int else 0)


def replay(plan: Dict[str, Any], size_of: Callable[[int, int], int], resident: Sequence[int],
           state: Sequence[int] = (), limit: Optional[int] = None) -> Replayed:
    """``plan`` (``plan_of``) replayed from a cold allocator holding ``resident`` (blocks, in order), ``state`` made
    where the first step's update starts, each made request ``size_of(traced bytes, carries)`` bytes; on a device of
    ``limit`` bytes, where given. ValueError: more requests than a replay takes."""
    count = requests_in(plan)
    if count > MAX_REQUESTS:
        raise ValueError(f"{count:,} allocator requests, more than the {MAX_REQUESTS:,} a replay takes")
    triples = [tuple(plan["requests"][i:i + 3]) for i in range(0, len(plan["requests"]), 3)]
    sizes = [size_of(value, carries) for kind, value, carries in triples if kind == _ALLOC]
    paired = {i: value for i, (kind, value, _) in enumerate(triples) if kind == _FREE_CARRIED and value >= 0}
    freed = {value for kind, value, _ in triples if kind == _FREE}
    once = set(range(len(sizes))) - freed - set(paired.values())  # kept by the window and freed by no next step
    unpaired = plan.get("unpaired", 0)
    unpaired = unpaired if type(unpaired) is int else 0
    allocator = CachingAllocator(limit)
    try:
        for size in resident:
            allocator.malloc(size)
        left: Dict[int, _Block] = {}  # made index -> its block, made and not freed by the step before
        for step in range(STEPS):
            allocator.peak = allocator.allocated
            first = step == 0
            blocks = _step(allocator, triples, sizes, paired, left, set() if first else once,
                           (plan["update_at"], state) if first else (-1, ()))
            left = {index: blocks[index] for index in paired.values() if index in blocks}
    except OutOfMemory:
        return Replayed(allocator.peak, allocator.reserved, True, unpaired)
    return Replayed(allocator.peak, allocator.reserved, False, unpaired)


def _step(allocator: CachingAllocator, triples: Sequence[Tuple[int, ...]], sizes: Sequence[int],
          paired: Dict[int, int], left: Dict[int, _Block], skipped: Set[int],
          update: Tuple[int, Sequence[int]]) -> Dict[int, _Block]:
    """One step's requests through ``allocator``: each made index -> its block. ``skipped`` made indices are not made
    (what the window made once and kept); ``update``: (a request's index, blocks made before it; past the last: after
    the step), the optimizer's state a first step makes."""
    blocks: Dict[int, _Block] = {}
    made = 0
    at, state = update
    for i, (kind, value, _) in enumerate(triples):
        if i == at:
            for size in state:
                allocator.malloc(size)
        if kind == _ALLOC:
            if made not in skipped:
                blocks[made] = allocator.malloc(sizes[made])
            made += 1
        elif kind == _FREE and value in blocks:  # (a crafted plan's free of nothing made is no free)
            allocator.free(blocks.pop(value))
        elif kind == _FREE_CARRIED and i in paired and paired[i] in left:  # (none in the first step)
            allocator.free(left.pop(paired[i]))
    for size in state if at >= len(triples) else ():  # no update in the window: its state is made after the step
        allocator.malloc(size)
    return blocks
