"""``readers.pairing``: the one rule the CLI and the tab join a traced step's ops with a breakdown by, on the cases a
run's log dir offers (the real runs: ``tests/integration/test_projection_torch.py``)."""

from __future__ import annotations

from typing import Dict, Optional

from tb_modelmem.readers.pairing import Candidate, checkpoint_folder_kind, choose

NAMES, NAMES_NOT, UNREADABLE = "names an optimizer", "names none", None


def _chose(offered: Dict[Candidate, Optional[str]], trace_step: Optional[int]) -> Optional[Candidate]:
    chosen = choose(offered, trace_step, offered.__getitem__, lambda record: record == NAMES)
    return chosen[0] if chosen else None


def test_a_summary_nearest_the_traced_step_before_a_newer_one_and_before_any_checkpoint():
    near, newer = Candidate("storage", 4, 10.0), Candidate("storage", 9, 20.0)
    file = Candidate("torch/ckpt.pt", None, 30.0)
    assert _chose({near: NAMES, newer: NAMES, file: NAMES}, 3) == near
    assert _chose({near: NAMES, newer: NAMES, file: NAMES}, None) == newer  # a file's trace has no step: any


def test_with_no_traced_step_each_tag_is_weighed_at_its_newest():
    early, late = Candidate("storage", 1, 10.0), Candidate("storage", 9, 20.0)  # only the late one is weighed
    assert _chose({early: NAMES, late: NAMES_NOT}, None) == late
    assert _chose({early: NAMES, late: NAMES_NOT}, 2) == early  # a step to be near: every step weighed


def test_of_those_as_near_the_first_that_names_an_optimizer_else_the_newest():
    before, after = Candidate("model", 2, 10.0), Candidate("storage", 4, 20.0)  # as near step 3, the newer first
    assert _chose({before: NAMES, after: NAMES_NOT}, 3) == before
    assert _chose({before: NAMES_NOT, after: NAMES_NOT}, 3) == after
    farther = Candidate("storage", 9, 30.0)
    assert _chose({before: NAMES_NOT, farther: NAMES}, 3) == before  # nearness first


def test_checkpoints_only_where_no_summary_can_be_read_one_that_cannot_passed_over():
    summary = Candidate("storage", 1, 10.0)
    weights, full = Candidate("torch/model.safetensors", None, 30.0), Candidate("torch/epoch=9.pt", None, 20.0)
    assert _chose({summary: UNREADABLE, weights: NAMES_NOT, full: NAMES}, None) == full
    assert _chose({summary: UNREADABLE, weights: NAMES_NOT, full: UNREADABLE}, None) == weights
    assert _chose({summary: UNREADABLE}, None) is None


def test_a_checkpoint_folder_is_told_by_the_files_it_holds():
    assert checkpoint_folder_kind(["model.safetensors", "optimizer.pt", "trainer_state.json"])
    assert checkpoint_folder_kind([".metadata", "__0_0.distcp"]) == "torch.distributed.checkpoint"
    assert checkpoint_folder_kind(["model.safetensors", "notes.txt"]) is None
    # a plain loop's run folder: its own files beside what it saved, each read alone
    assert checkpoint_folder_kind(["host_1.1.pt.trace.json", "optimizer.pt", "model.safetensors"]) is None
    assert checkpoint_folder_kind(["events.out.tfevents.1.host", "optimizer.pt", "model.safetensors"]) is None
