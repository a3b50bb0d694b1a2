"""PyTorch's CUDA caching allocator, modelled, to replay a traced step's requests at another setting: what it
reserves from the device (segments), which an out-of-memory error counts, beside the tensors' bytes. No torch.

The rules are ``c10/cuda/CUDACachingAllocator.cpp``'s with its defaults (no ``max_split_size_mb``, no
expandable segments, one stream): a request is rounded up to 512 B; up to 1 MiB it is served from the small
pool, whose segments are 2 MiB, else from the large pool, whose segments are 20 MiB for requests under 10 MiB
and the request rounded up to 2 MiB from there; the smallest cached block that fits is taken (best fit), and
split when what is left is at least 512 B (small pool) or over 1 MiB (large); a freed block merges with free
neighbours of its segment. Segments are never given back (only an out-of-memory retry or ``empty_cache`` does).

A trace's window is one step, cut anywhere: the buffers it frees that were made before it are the ones the
step leaves for the next (last step's gradients, say), so the step is replayed as a cycle, each of them paired
with an allocation the window makes and never frees, of the same size. The history before is not in the trace;
the replay starts cold: what the window held throughout first (the weights), one step with the optimizer's state
made where its update starts (``torch.optim`` makes it on the first ``step()``), then steady steps.
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tb_modelmem.schema.names import OPTIMIZER_TEMPORARIES_CATEGORY

MIN_BLOCK = 512  # kMinBlockSize: every request is rounded up to a multiple of it
SMALL_SIZE = 1 << 20  # kSmallSize: requests up to this are the small pool's
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small-pool segment
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc: from here a segment is the request rounded to ROUND_LARGE
ROUND_LARGE = 2 << 20  # kRoundLarge
LARGE_BUFFER = 20 << 20  # kLargeBuffer: a large-pool segment for a request under MIN_LARGE_ALLOC
STEPS = 3  # replayed: the first (history: the state made), then two steady ones (the figure is the last's)
MAX_REQUESTS = 200_000  # a plan longer is refused (a crafted trace): a replay of this many takes ~0.5 s
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


class CachingAllocator:
    """The allocator's blocks and segments; ``allocated`` and ``reserved`` are its counters, as torch reports them
    ("Total Allocated", "Total Reserved")."""

    def __init__(self) -> None:
        self._pools: Dict[bool, List[Tuple[int, int, _Block]]] = {True: [], False: []}  # small? -> (size, address)
        self._top = 0
        self.allocated = self.reserved = self.peak = 0

    def malloc(self, size: int) -> _Block:
        size = round_size(size)
        small = size <= SMALL_SIZE
        pool = self._pools[small]
        i = bisect.bisect_left(pool, (size, -1))
        if i < len(pool):
            block = pool.pop(i)[2]
        else:
            block = _Block(self._top, segment_size(size), small)
            self._top += block.size + (1 << 44)  # segments are apart: blocks never merge across them
            self.reserved += block.size
        rest = block.size - size
        if rest >= MIN_BLOCK if small else rest > SMALL_SIZE:
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

    def free(self, block: _Block) -> None:
        self.allocated -= block.size
        block.used = False
        small = block.small
        for neighbour in (block.prev, block.next):
            if neighbour is not None and not neighbour.used:
                self._take(neighbour, small)
                first, second = (neighbour, block) if neighbour is block.prev else (block, neighbour)
                first.size += second.size
                first.next = second.next
                if second.next is not None:
                    second.next.prev = first
                block = first
        bisect.insort(self._pools[small], (block.size, block.address, block))

    def _take(self, block: _Block, small: bool) -> None:
        pool = self._pools[small]
        pool.pop(bisect.bisect_left(pool, (block.size, block.address)))


def plan_of(events: Sequence[Any], device: str) -> Optional[Dict[str, Any]]:
    """What ``replay`` needs of one device's allocator events (``readers.allocator_replay.Event``s, in time
    order), or None where its allocator is
    not a caching one (no "Total Reserved": a CPU): ``requests`` (a flat list of (kind, value, carries) triples:
    made of ``value`` bytes, carrying the batch (bit 0) and the sequence so many times (the bits above); freed,
    ``value`` the index of its making; or freed having been made before the window, ``value`` its bytes),
    ``resident_bytes`` (held all window), ``update_at`` (the first request of the optimizer's update)."""
    mine = [e for e in events if e.allocator == device]
    if not mine or not any(e.reserved for e in mine):
        return None
    if len(mine) > MAX_REQUESTS:  # kept as a count, so the answer says why it has no figure
        return {"requests": [], "resident_bytes": 0, "update_at": 0, "left_out": len(mine)}
    requests: List[int] = []
    made: Dict[Any, int] = {}
    count = 0
    update_at: Optional[int] = None
    carried_in = 0
    for e in mine:
        if e.delta > 0:
            if update_at is None and e.category == OPTIMIZER_TEMPORARIES_CATEGORY:
                update_at = len(requests) // 3
            made[e.key] = count
            count += 1
            requests += [_ALLOC, e.delta, int(e.batch) | e.seq << 1]
        elif e.key in made:
            requests += [_FREE, made.pop(e.key), 0]
        else:
            carried_in -= e.delta
            requests += [_FREE_CARRIED, -e.delta, 0]
    first = mine[0]
    start = (first.in_use or 0) - first.delta
    return {"requests": requests, "resident_bytes": max(int(start) - carried_in, 0),
            "update_at": len(requests) // 3 if update_at is None else update_at}


def replay(plan: Dict[str, Any], size_of: Callable[[int, int], int], resident: Sequence[int],
           state: Sequence[int] = ()) -> Tuple[int, int]:
    """(The highest bytes allocated in the last step, the bytes reserved after it): ``plan`` (``plan_of``)
    replayed from a cold allocator holding ``resident`` (blocks, in order), ``state`` made where the first
    step's update starts; each made request is ``size_of(traced bytes, carries)`` bytes."""
    left_out = plan.get("left_out")
    count = max(len(plan["requests"]) // 3, left_out if isinstance(left_out, int) else 0)
    if count > MAX_REQUESTS:
        raise ValueError(f"{count:,} allocator requests, more than the {MAX_REQUESTS:,} a replay takes")
    triples = [tuple(plan["requests"][i:i + 3]) for i in range(0, len(plan["requests"]), 3)]
    sizes: List[int] = []
    for kind, value, carries in triples:
        if kind == _ALLOC:
            sizes.append(size_of(value, carries))
    paired = _pairs(triples)  # request index of a free of a buffer made before the window -> made index
    allocator = CachingAllocator()
    for size in resident:
        allocator.malloc(size)
    left: Dict[int, _Block] = {}  # made index -> its block, made and not freed by the step before
    for step in range(STEPS):
        allocator.peak = allocator.allocated
        blocks: Dict[int, _Block] = {}
        made = 0
        for i, (kind, value, carries) in enumerate(triples):
            if step == 0 and i == plan["update_at"]:
                for size in state:
                    allocator.malloc(size)
            if kind == _ALLOC:
                blocks[made] = allocator.malloc(sizes[made])
                made += 1
            elif kind == _FREE and value in blocks:  # (a crafted plan's free of nothing made is no free)
                allocator.free(blocks.pop(value))
            elif kind == _FREE_CARRIED and i in paired and paired[i] in left:  # (none in the first step)
                allocator.free(left.pop(paired[i]))
        left = {index: blocks[index] for index in paired.values() if index in blocks}
    return allocator.peak, allocator.reserved


def _pairs(triples: Sequence[Tuple[int, ...]]) -> Dict[int, int]:
    """Each free of a buffer made before the window -> the allocation the window makes and never frees, of the
    same bytes, that is that buffer one step on (in order: the step leaves them as it found them)."""
    freed = {value for kind, value, _ in triples if kind == _FREE}
    kept: Dict[int, List[int]] = {}
    made = 0
    for kind, value, _ in triples:
        if kind == _ALLOC:
            if made not in freed:
                kept.setdefault(value, []).append(made)
            made += 1
    out = {}
    for i, (kind, value, _) in enumerate(triples):
        if kind == _FREE_CARRIED and kept.get(value):
            out[i] = kept[value].pop(0)
    return out
