"""Several models of one loop (a GAN's) as one module: named by class, or by the dict's keys, each tensor once."""

from __future__ import annotations

import pytest

from tb_modelmem.capture.torch_modules import as_module, breakdown_of_module

torch = pytest.importorskip("torch")


def test_a_compiled_model_in_a_list_is_named_by_its_own_class():
    class Generator(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.main = torch.nn.Linear(2, 2)

    assert list(as_module([torch.compile(Generator()), Generator()]).keys()) == ["Generator", "Generator_2"]


def test_a_list_is_named_by_class_and_a_second_of_one_class_numbered():
    first, second, head = torch.nn.Linear(3, 4), torch.nn.Linear(4, 4), torch.nn.Conv2d(1, 2, 3)
    joined = as_module([first, second, head])
    assert list(joined.keys()) == ["Linear", "Linear_2", "Conv2d"]
    record = breakdown_of_module(joined)
    names = [v.name for v in record.variables.records()]
    assert names == ["Linear.weight", "Linear.bias", "Linear_2.weight", "Linear_2.bias", "Conv2d.weight", "Conv2d.bias"]
    # the whole is named by its models, as Storage's header and its whole-model row say it (not "ModuleDict")
    assert record.model_name == "Linear + Linear_2 + Conv2d"
    assert [layer.name for layer in record.layers.records()][0] == "Linear + Linear_2 + Conv2d"
    # one model in a list: the whole is not named as its one member, whose own row is "Linear"
    alone = [layer.name for layer in breakdown_of_module(as_module([torch.nn.Linear(2, 2)])).layers.records()]
    assert len(alone) == len(set(alone)) and "Linear" in alone


def test_a_dict_keeps_its_keys_a_shared_module_is_counted_once_and_anything_else_is_left_as_it_is():
    shared = torch.nn.Linear(5, 5)
    joined = as_module({"netG": torch.nn.Sequential(shared), "net.D": torch.nn.Sequential(shared)})
    assert list(joined.keys()) == ["netG", "net_D"]  # a module's name holds no "."
    record = breakdown_of_module(joined)
    assert sum(v.bytes for v in record.variables.records()) == (5 * 5 + 5) * 4  # the shared layer's bytes once
    # keys ModuleDict would refuse or that meet once their "." is gone: each model kept, under its own name
    clash = as_module({"training": torch.nn.Linear(1, 1), "a.b": torch.nn.Linear(1, 2), "a_b": torch.nn.Linear(1, 3)})
    assert list(clash.keys()) == ["training_", "a_b", "a_b_2"]
    assert [m.out_features for m in clash.values()] == [1, 2, 3]
    model, not_modules = torch.nn.Linear(2, 2), [object()]
    assert as_module(model) is model and as_module(not_modules) is not_modules and as_module([]) == []
