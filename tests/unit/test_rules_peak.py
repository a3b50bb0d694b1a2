"""rules.peak on real records: the resident state of a torch checkpoint against torch's own figures
(tests/fixtures/torch/truth.json), one copy of a mirrored variable, and the peak split and timeline
bands of a real H100 ResNet50 trace against torch's own peak (tests/fixtures/torch_h100/README.md)."""

from __future__ import annotations

import dataclasses
import functools
import glob
import gzip
import json
import os

from tb_modelmem.readers.torch_checkpoint import read_torch_checkpoint
from tb_modelmem.readers.torch_trace import reduce_trace
from tb_modelmem.rules.peak import peak_by_category, resident_state, stacks
from tb_modelmem.schema.names import RESIDENT_CATEGORIES, UNATTRIBUTED_CATEGORY
from tb_modelmem.schema.records import Breakdown, OpTrace, VariableTable

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
TORCH_PEAK = 3_182_946_816  # torch.cuda.max_memory_allocated(), torch_h100/README.md


@functools.lru_cache(maxsize=1)
def _h100() -> OpTrace:
    path, = glob.glob(os.path.join(FIXTURES, "torch_h100", "*.pt.trace.json.gz"))
    with gzip.open(path) as f:
        return reduce_trace(json.load(f))


def _checkpoint() -> Breakdown:
    return read_torch_checkpoint(os.path.join(FIXTURES, "torch", "cnn_adam.pt"))


def test_resident_state_of_a_torch_checkpoint_is_torchs_own_bytes():
    with open(os.path.join(FIXTURES, "torch", "truth.json")) as f:
        truth = json.load(f)["cnn_adam.pt"]
    assert not _h100().resident  # a torch trace names no state of its own: the breakdown's is read
    state = resident_state(_h100(), _checkpoint())
    assert state is not None
    assert state["weights"] == truth["parameters"] == 22_056
    assert state["optimizer_slots"] == truth["optimizer_state"]["exp_avg"] + truth["optimizer_state"]["exp_avg_sq"]
    assert sum(state.values()) == truth["parameters"] + truth["buffers"] + sum(truth["optimizer_state"].values())


def test_a_mirrored_variable_counts_one_copy_on_the_traced_device():
    breakdown = _checkpoint()
    columns = breakdown.variables.columns
    twice = VariableTable({**columns, "bytes": [2 * b for b in columns["bytes"]],
                           "replicas": [2] * len(breakdown.variables)})  # bytes: both devices' copies
    mirrored = dataclasses.replace(breakdown, variables=twice)
    assert resident_state(_h100(), mirrored) == resident_state(_h100(), breakdown)


def test_no_state_is_unknown_not_zero():
    assert resident_state(_h100(), None) is None


def test_the_h100_peak_splits_torchs_own_peak_and_the_bands_add_up():
    trace = _h100()
    peak = peak_by_category(trace, None)
    assert peak["total"] == TORCH_PEAK
    known = sum(v for k, v in peak.items() if k not in ("total", "unknown", "step_peak_bytes") and v is not None)
    assert known == TORCH_PEAK  # every byte in one category
    assert all(peak[c] is None and c in peak["unknown"] for c in RESIDENT_CATEGORIES)  # no breakdown: unknown
    bands = stacks(trace, peak)
    for i in range(len(trace.timeline.t_us)):  # the count holds the state: the bands add up to it
        assert sum(v[i] for v in bands.values()) == trace.timeline.bytes[i]
    assert trace.timeline.bytes[-1] == 506_755_072  # torch.cuda.memory_allocated() after the run (the README)
    assert bands[UNATTRIBUTED_CATEGORY][trace.timeline.bytes.index(TORCH_PEAK)] == peak[UNATTRIBUTED_CATEGORY]
