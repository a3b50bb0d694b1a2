"""The names What if takes for a torch.optim step's implementation (``torch_optimizers.split_path``), as a user
types them on the command line or picks them in the tab, and the one a class cannot take."""

from __future__ import annotations

import pytest

from tb_modelmem.rules import torch_optimizers
from tb_modelmem.rules.projection_state import optimizer_choices, optimizer_class


@pytest.mark.parametrize("name,expected", [
    ("AdamW fused", ("AdamW", ("fused",))), ("adamw_fused", ("AdamW", ("fused",))),
    ("SGD-foreach", ("SGD", ("foreach",))), ("Adam for-loop", ("Adam", ("for-loop",))),
    ("adam_for_loop", ("Adam", ("for-loop",))), ("momentum foreach", ("SGD", ("momentum", "foreach"))),
    ("RMSprop", ("RMSprop", ()))])
def test_an_implementation_is_named_after_the_class(name, expected):
    assert optimizer_class(name, True) == expected
    assert optimizer_class(name, None) == expected  # asked before the run is read


def test_a_class_with_no_fused_kernel_and_keras_names_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="RMSprop has no fused kernel"):
        optimizer_class("RMSprop fused", True)
    with pytest.raises(ValueError, match="no built-in Keras optimizer"):
        optimizer_class("Adam fused", False)  # Keras has no implementations by name


def test_every_name_the_tab_offers_a_pytorch_run_is_one_it_takes():
    offered = optimizer_choices(True)
    assert {"AdamW fused", "Adam foreach"} <= set(offered) and "RMSprop fused" not in offered
    for name in offered:
        optimizer_class(name, True)


def test_the_traced_class_asked_with_an_implementation_keeps_its_config():
    """"Adam fused" of an Adam(amsgrad) run is that Adam, fused: its slots keep amsgrad's third moment."""
    from tb_modelmem.rules.projection_state import State, WhatIf

    trainable = [("w", (4, 8), "float32")]
    state = State({"weights": 128, "non_trainable": 0, "optimizer_slots": 384, "other_state": 4}, trainable,
                  ("Adam", ("amsgrad",), ""), "breakdown", {}, torch=True)
    projected = state.projected(WhatIf(optimizer="Adam fused"), [], {}, [])
    assert projected["optimizer_slots"] == 3 * 128


def test_each_param_group_reads_its_own_settings_over_the_first_ones():
    """Trainer's two groups as ``optimizer_record`` writes them: the no-decay group's own weight decay, 0, turns
    off the first group's flag; the rest of its settings are the first group's."""
    entry = {"class_name": "SGD", "config": {"momentum": 0.9, "weight_decay": 0.01},
             "groups": [{"params": ["fc1.weight"], "config": {}},
                        {"params": ["fc1.bias", "norm.weight"], "config": {"weight_decay": 0.0}}]}
    assert torch_optimizers.group_plans(entry) == [(("momentum", "weight_decay"), ["fc1.weight"]),
                                                   (("momentum",), ["fc1.bias", "norm.weight"])]


@pytest.mark.parametrize("groups", [None, "x", [1], [{"params": "fc1.weight", "config": {}}], [{"params": []}]])
def test_a_malformed_groups_entry_reads_as_one_group(groups):
    entry = {"class_name": "Adam", "config": {"weight_decay": 0.01}, "groups": groups}
    assert torch_optimizers.group_plans(entry) == []
