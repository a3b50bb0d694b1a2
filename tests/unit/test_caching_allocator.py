"""The CUDA caching allocator's rules as ``c10/cuda/CUDACachingAllocator.cpp`` states them (its defaults), on
requests chosen to meet each: the segment a request opens, best fit, when a block is split or handed whole,
merging on free, and segments never given back. The model against a real GPU run is
tests/integration/test_torch_trace.py (the H100 ResNet50 step's own "Total Reserved")."""

from tb_modelmem.rules.caching_allocator import CachingAllocator, plan_of, replay, round_size, segment_size

MiB = 1 << 20


def test_requests_round_to_512_bytes_and_open_the_segment_their_size_asks():
    assert [round_size(n) for n in (0, 1, 512, 513)] == [512, 512, 512, 1024]
    assert segment_size(MiB) == 2 * MiB  # the small pool's 2 MiB segments, up to 1 MiB
    assert segment_size(MiB + 512) == 20 * MiB  # the large pool's 20 MiB ones, under 10 MiB
    assert segment_size(10 * MiB) == 10 * MiB and segment_size(11 * MiB + 512) == 12 * MiB  # then rounded to 2 MiB


def test_small_requests_share_a_2_mib_segment_and_large_ones_a_20_mib_one():
    a = CachingAllocator()
    for _ in range(4):
        a.malloc(500 << 10)  # 500 KiB each: four fit in one small segment
    assert a.reserved == 2 * MiB and a.allocated == 4 * (500 << 10)
    a.malloc(500 << 10)  # the fifth does not (48 KiB is left): a second segment
    assert a.reserved == 4 * MiB
    a.malloc(3 * MiB)
    a.malloc(3 * MiB)
    assert a.reserved == 4 * MiB + 20 * MiB  # both 3 MiB blocks split from one 20 MiB segment


def test_a_large_block_is_handed_whole_when_at_most_1_mib_would_be_left():
    a = CachingAllocator()
    block = a.malloc(19 * MiB + 512)  # 19 MiB + 512 from a 20 MiB segment leaves 1 MiB - 512: not split
    assert a.allocated == 20 * MiB and block.size == 20 * MiB
    a.free(block)
    a.malloc(18 * MiB)  # 2 MiB left over 1 MiB: split
    assert a.allocated == 18 * MiB and a.reserved == 20 * MiB


def test_best_fit_and_merging_on_free_reuse_the_cache_and_segments_stay():
    a = CachingAllocator()
    first, second, third = (a.malloc(6 * MiB) for _ in range(3))  # one 20 MiB segment, 2 MiB left
    a.free(first)
    a.free(second)  # merges with the free 6 MiB beside it: 12 MiB free in one block
    a.malloc(11 * MiB)  # fits the merged block: no new segment
    assert a.reserved == 20 * MiB
    a.free(third)
    assert a.allocated == 11 * MiB + MiB and a.reserved == 20 * MiB  # (12 MiB was split, 1 MiB left was not)
    a.malloc(30 * MiB)
    assert a.reserved == 20 * MiB + 30 * MiB


def _event(key, delta, shape="", dtype="", batch=False, category="activations"):
    """One allocator event as the torch reader makes it (``readers.allocator_replay.Event``'s fields used here)."""
    from types import SimpleNamespace

    return SimpleNamespace(allocator="cuda:0", delta=delta, key=key, shape=shape, dtype=dtype, batch=batch, seq=0,
                           category=category, in_use=float(64 * MiB), reserved=float(80 * MiB))


def test_a_window_cut_mid_step_is_replayed_as_a_cycle():
    """A window that frees last step's 8 MiB buffer and makes this step's, never freed: the pair is one buffer a
    step on, so a steady step holds one of them beside what it makes, not one more each step."""
    plan = plan_of([_event("a", 4 * MiB, batch=True),  # a batch-carrying buffer
                    _event("old", -8 * MiB),  # last step's buffer, freed
                    _event("a", -4 * MiB),
                    _event("new", 8 * MiB)], "cuda:0")  # this step's, left for the next
    assert plan["requests"] == [0, 4 * MiB, 1, 2, 1, 0, 1, 0, 0, 0, 8 * MiB, 0] and plan["unpaired"] == 0
    replayed = replay(plan, lambda size, carries: size * (2 if carries & 1 else 1), [])
    assert replayed.allocated == 16 * MiB  # last step's 8 MiB beside the batch-carrying buffer at twice the batch
    assert replayed.reserved == 20 * MiB  # both split from one 20 MiB segment, reused every step
    assert not replayed.out_of_memory and replayed.unpaired == 0


def test_a_plan_too_long_to_replay_says_so_and_a_crafted_one_frees_nothing_it_never_made():
    """A window of more requests than a replay takes keeps its count, so the answer says why there is no figure;
    a crafted plan's free of an index never made, or of an unknown kind, is no free."""
    import pytest

    from tb_modelmem.rules.caching_allocator import MAX_REQUESTS

    with pytest.raises(ValueError, match=f"{MAX_REQUESTS + 1:,} allocator requests, more than"):
        replay({"requests": [], "resident_bytes": 0, "update_at": 0, "left_out": MAX_REQUESTS + 1},
               lambda size, carries: size, [])
    crafted = {"requests": [1, 7, 0, 9, 5, 0, 0, MiB, 0, 1, 0, 0, 1, 0, 0], "resident_bytes": 0, "update_at": 0}
    assert replay(crafted, lambda size, carries: size, [])[:2] == (MiB, 2 * MiB)


def test_out_of_memory_gives_back_the_wholly_free_segments_first():
    """torch's malloc, when a new segment would not fit: release_cached_blocks, then cudaMalloc again."""
    from tb_modelmem.rules.caching_allocator import OutOfMemory

    a = CachingAllocator(limit=40 * MiB)
    a.free(a.malloc(12 * MiB))  # a 12 MiB segment, wholly free
    kept = a.malloc(14 * MiB)  # does not fit it: a 14 MiB segment, in use
    assert a.reserved == 26 * MiB
    a.malloc(16 * MiB)  # 26 + 16 > 40: the free 12 MiB segment is given back, then 14 + 16 fits
    assert a.reserved == 30 * MiB
    a.free(kept)
    try:
        a.malloc(30 * MiB)  # the 14 MiB segment is free again and given back, but 16 + 30 > 40
    except OutOfMemory:
        assert a.reserved == 16 * MiB
    else:
        raise AssertionError("30 MiB fitted a 40 MiB device holding 16 MiB")


def test_leftovers_pair_in_order_and_a_window_without_its_update_makes_the_state_after_the_step():
    """A window that keeps an 8 MiB buffer and frees last step's 6 MiB one (another size: a block handed whole one
    step and split the next) pairs them in order, and says so; with no update in it, the state is made at its end."""
    plan = plan_of([_event("old", -6 * MiB), _event("new", 8 * MiB)], "cuda:0")
    assert plan["requests"] == [2, 0, 0, 0, 8 * MiB, 0] and plan["unpaired"] == 1 and plan["update_at"] == 2
    replayed = replay(plan, lambda size, carries: size, [], state=[3 * MiB])
    assert replayed.unpaired == 1
    assert replayed.allocated == 8 * MiB + 3 * MiB  # this step's, and the state made after the first: one each
    assert replayed.reserved == 20 * MiB


def test_the_plan_asks_a_buffers_own_bytes_where_its_block_was_handed_whole():
    """torch reports a block's size: a [32,64,56,56] int64 buffer (51,380,224 B) was handed its 50 MiB segment whole
    (1 MiB left is not split) in the H100 trace; the plan asks what the shape says, a 2-D [3] float32 its 512 B."""
    def made(key, size, shape, dtype):
        return _event(key, size, shape, dtype, batch=True)

    plan = plan_of([made(1, 52_428_800, "[32,64,56,56]", "int64"), made(2, 512, "[3]", "float32"),
                    made(3, 4 * MiB, "[5]", "float32")], "cuda:0")
    assert plan["requests"][1::3] == [51_380_224, 12, 4 * MiB]  # (a shape that does not fit its block: the block)
    assert plan["update_at"] == 3  # no update in the window
