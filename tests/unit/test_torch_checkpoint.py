"""PyTorch checkpoints (tests/fixtures/torch, torch.save of a real CNN trained two steps on CPU): each role
to the byte against torch's own nbytes (truth.json), the file reconciled to os.path.getsize, and pickles
that try to run code or hold a whole module refused. No torch needed."""

from __future__ import annotations

import json
import os
import pickle
import zipfile

import pytest

from tb_modelmem.readers.bounded import InspectError
from tb_modelmem.readers.model_file import read_path
from tb_modelmem.readers.safe_pickle import UnsafePickle
from tb_modelmem.readers.torch_checkpoint import SOURCE, read_torch_checkpoint
from tb_modelmem.rules import roles
from tb_modelmem.schema.names import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT
from tb_modelmem.schema.records import bytes_by_role

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "torch")
TRUTH = json.load(open(os.path.join(HERE, "truth.json")))
NAMES = ["cnn_adam.pt", "cnn_sgd_momentum.pth", "cnn_state_dict_legacy.pt"]


@pytest.mark.parametrize("name", NAMES)
def test_roles_to_the_byte(name):
    truth = TRUTH[name]
    bd = read_path(os.path.join(HERE, name))
    assert bd.source == SOURCE
    roles = bytes_by_role(bd.variables)
    state = truth["optimizer_state"]
    assert roles[WEIGHT] == truth["parameters"] == 22056
    assert roles[NON_TRAINABLE] == truth["buffers"] == 400
    assert roles[OPTIMIZER_SLOT] == sum(v for k, v in state.items() if k != "step")
    assert roles[OTHER] == state.get("step", 0)
    assert bd.file_bytes == truth["file_bytes"] == os.path.getsize(os.path.join(HERE, name))
    assert sum(bd.variables.column("bytes")) + sum(line["bytes"] for line in bd.overhead) == bd.file_bytes
    assert all(line["bytes"] >= 0 for line in bd.overhead)


@pytest.mark.parametrize("name,slots,class_name", [("cnn_adam.pt", ("exp_avg", "exp_avg_sq", "step"), "Adam"),
                                                   ("cnn_sgd_momentum.pth", ("momentum_buffer",), "SGD")])
def test_slots_tied_to_their_parameter(name, slots, class_name):
    bd = read_path(os.path.join(HERE, name))
    assert bd.optimizer["class_name"] == class_name
    tied = {}
    for v in bd.variables:
        if v.slot:
            assert v.slot_of is not None
            tied.setdefault(v.slot_of, {})[v.slot] = v.bytes
    assert tied == TRUTH[name]["state_by_parameter"]
    assert set(next(iter(tied.values()))) == set(slots)


def test_a_parameter_missing_from_the_state_dict_leaves_only_its_own_slots_untied(tmp_path):
    """A state_dict with one parameter fewer than the optimizer lists: no order fits, so slots are paired by
    shape, each shape on its own; the missing parameter's are unknown, with the reason, and every other slot
    is its own parameter's, as the real run's optimizer.state held it (truth.json)."""
    src = os.path.join(HERE, "cnn_adam.pt")
    bd = read_torch_checkpoint(src)
    assert all(v.slot_of for v in bd.variables if v.slot)  # the good case first
    # one parameter renamed as a buffer: 9 parameters, 10 optimizer indices
    path = tmp_path / "renamed.pt"
    _rewrite_pickle(src, path, lambda pkl: pkl.replace(b"X\x08\x00\x00\x000.weight",
                                                       b"X\x0e\x00\x00\x000.running_mean"))
    bd = read_torch_checkpoint(str(path))
    slots = [v for v in bd.variables if v.role == OPTIMIZER_SLOT]
    untied = {v.name for v in slots if v.slot_of is None}
    assert untied == {"optimizer.state.0.exp_avg", "optimizer.state.0.exp_avg_sq"}  # 0.weight's, [16, 3, 3, 3]
    truth = TRUTH["cnn_adam.pt"]["state_by_parameter"]
    assert all(truth[v.slot_of][v.slot] == v.bytes for v in slots if v.slot_of)
    assert {v.slot_of for v in slots if v.slot_of} == set(truth) - {"0.weight"}
    assert any("1 of its 10 parameters untied" in line["what"] for line in bd.overhead), bd.overhead


def _rewrite_pickle(src, dst, edit):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, edit(data) if info.filename.endswith("data.pkl") else data)


class _RunsShell:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_hostile_checkpoint_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    src = os.path.join(HERE, "cnn_adam.pt")
    evil = pickle.dumps({"model": _RunsShell(f"touch {marker}")}, protocol=2)
    path = tmp_path / "evil.pt"
    _rewrite_pickle(src, path, lambda pkl: evil)
    with pytest.raises(UnsafePickle, match=r"refused: it names (posix|os)\.system.*state_dict"):
        read_path(str(path))
    assert not marker.exists()


def test_pickled_module_is_refused(tmp_path):
    path = tmp_path / "module.pt"
    _rewrite_pickle(os.path.join(HERE, "cnn_adam.pt"), path,
                    lambda pkl: b"\x80\x02c__main__\nNet\nq\x00)\x81q\x01.")
    with pytest.raises(UnsafePickle, match="__main__.Net.*model.state_dict"):
        read_path(str(path))


@pytest.mark.parametrize("damage,match", [
    (lambda b: b[:len(b) // 2], "corrupt zip|truncated|not a PyTorch"),
    (lambda b: b"\x80\x02" + b[2:200], "not a readable pickle|not a PyTorch|truncated"),
    (lambda b: b"hello world", "not a PyTorch checkpoint|not a model file"),
])
def test_damaged_files_are_one_clear_error(tmp_path, damage, match):
    path = tmp_path / "bad.pt"
    path.write_bytes(damage(open(os.path.join(HERE, "cnn_adam.pt"), "rb").read()))
    with pytest.raises(InspectError, match=match):
        read_path(str(path))


def test_truncated_legacy(tmp_path):
    path = tmp_path / "cut.pt"
    data = open(os.path.join(HERE, "cnn_state_dict_legacy.pt"), "rb").read()
    path.write_bytes(data[:-100])
    with pytest.raises(InspectError, match="truncated"):
        read_path(str(path))


def test_missing_storage_is_an_error(tmp_path):
    path = tmp_path / "missing.pt"
    with zipfile.ZipFile(os.path.join(HERE, "cnn_adam.pt")) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith("/data/3"):
                zout.writestr(info, zin.read(info))
    with pytest.raises(InspectError, match="storage '3' is not in the archive"):
        read_path(str(path))


def test_shapes_pair_slots_only_where_no_byte_can_move():
    """safetensors keeps no parameter order: each shape's parameters pair with the indices whose slots have
    that shape, in name order, where they are as many and their slots alike, so a twin taking the other's
    index moves no byte between layers; a shape that cannot pair stays untied alone; a group's members are
    known only where every index paired and no shape sits in two groups."""
    params = [("h.10.fc.weight", (4, 3)), ("h.10.fc.bias", (4,)), ("h.2.fc.weight", (4, 3)), ("h.2.fc.bias", (4,))]

    def adam(shape, dtype="float32"):
        return (("exp_avg", shape, dtype), ("exp_avg_sq", shape, dtype))

    slots = {0: adam((4, 3)), 1: adam((4, 3)), 2: adam((4,)), 3: adam((4,))}
    paired = roles.torch_pairing_by_shape(params, [[0, 1], [2, 3]], slots)  # decayed matrices, then vectors
    assert [paired.owners[i][0] for i in range(4)] == ["h.2.fc.weight", "h.10.fc.weight", "h.2.fc.bias",
                                                        "h.10.fc.bias"]
    assert paired.groups_known and paired.twins == 4 and paired.why == ""
    split = roles.torch_pairing_by_shape(params, [[0, 2], [1, 3]], slots)  # a vector in each group
    assert len(split.owners) == 4 and not split.groups_known and "sit in several param groups" in split.why
    untied = {
        "1 with slots of shape [4] for 2 weights": ({**slots, 3: ()}, {0, 1}),  # never stepped: [4] unknown
        "several shapes (factored": ({**slots, 0: (("row", (4,), "float32"), ("col", (3,), "float32"))}, {2, 3}),
        "1 with slots of shape [5] for 0 weights": ({**slots, 3: adam((5,))}, {0, 1}),
        "whose slots differ": ({**slots, 3: adam((4,), "bfloat16")}, {0, 1}),  # which is whose would move bytes
    }
    for expected, (given, tied) in untied.items():
        paired = roles.torch_pairing_by_shape(params, [[0, 1], [2, 3]], given)
        assert set(paired.owners) == tied and expected in paired.why and not paired.groups_known, (expected, paired)
    nothing = roles.torch_pairing_by_shape(params, [[0, 1, 2, 3]], {})  # plain SGD: no slots to tie, nothing said
    assert nothing.owners == {} and nothing.why == ""
