"""join.Joiner's work done ahead of the profile (Joiner.prepare) never decides for the profile's names."""

from __future__ import annotations

from tb_modelmem.rules.join import GraphAnalysis, Joiner, OpGraph, Vocabulary, node_entry
from tb_modelmem.schema.names import BACKWARD, EXECUTOR, FORWARD, OPTIMIZER, OPTIMIZER_SLOT, WEIGHT


def test_a_join_prepared_before_the_names_is_redone_when_the_names_change_the_renaming_rule():
    """A model with layers "dense", "dense_1" and "flatten". Its traced scope "dense_1" is either
    layer "dense_1" (scopes named as the layers) or layer "dense" renamed (Keras 3 adds one
    "_N" to each scope): the trace's other scopes decide. Prepared with no names, nothing says
    the scopes were renamed. A profile whose "flatten" ran as "flatten_1" says they were."""
    vocabulary = Vocabulary(["dense", "dense_1", "flatten"])
    graphs = [OpGraph({"dense_1/MatMul": "MatMul"}, {"dense_1/MatMul": []})]
    Joiner.prepare(vocabulary, graphs)

    renamed = Joiner.reused(vocabulary, graphs, ["flatten_1/Reshape", "dense_1/MatMul"])
    assert renamed.assign("dense_1/MatMul", "MatMul") == ("dense", FORWARD)
    assert renamed.assign("flatten_1/Reshape", "Reshape") == ("flatten", FORWARD)

    as_named = Joiner.reused(vocabulary, graphs, ["flatten/Reshape", "dense_1/MatMul"])
    assert as_named.assign("dense_1/MatMul", "MatMul") == ("dense_1", FORWARD)
    # the prepared join is kept for the names that keep its rule; the renamed one is its own
    assert len(GraphAnalysis.reused(vocabulary, graphs).joined) == 2


def test_an_op_listed_before_the_variable_read_it_takes_is_still_joined_through_it():
    """Graphs list their ops as made (inputs first), and the analysis takes that order as it is;
    a graph listed otherwise (a loop's back edge, a GraphDef written in any order) is ordered
    producers first, so an op is still known by the variable it reads through a ReadVariableOp:
    here Adam's slot, which makes the Mul the optimizer's, not the forward pass its name suggests."""
    vocabulary = Vocabulary(["dense"], {"dense/kernel": "dense", "dense/kernel/m": "dense"},
                            {"dense/kernel": WEIGHT, "dense/kernel/m": OPTIMIZER_SLOT})
    nodes = {"handle": ("VarHandleOp", []), "block7/read": ("ReadVariableOp", ["handle"]),
             "x": ("Placeholder", []), "block7/Mul": ("Mul", ["x", "block7/read"])}
    for listed in (list(nodes), list(reversed(nodes))):
        graph = OpGraph({n: nodes[n][0] for n in listed}, {n: nodes[n][1] for n in listed},
                        {"handle": "dense/kernel/m"})
        assert Joiner(vocabulary, [graph]).assign("block7/Mul", "Mul") == ("dense", OPTIMIZER), listed


def test_an_executed_name_stands_for_the_node_it_ends_with():
    """A function inlined into a call carries the call node as a prefix: the names to look up, longest first."""
    name = "StatefulPartitionedCall/model/dense/MatMul"
    every = {n: n for n in (name, "model/dense/MatMul", "dense/MatMul", "MatMul")}
    assert node_entry([every], name) == name  # the longest first
    assert node_entry([{}, {"dense/MatMul": 1, "MatMul": 2}], name) == 1
    assert node_entry([{"MatMul": 1}, {"dense/MatMul": 2}], name) == 2  # a longer name before an earlier table
    assert node_entry([{"model/dense": 1, "atMul": 2, "/MatMul": 3}], name) is None  # whole components only
    assert node_entry([{"MatMul": 1}], "MatMul") == 1
    assert [node_entry([{k: k}], "a//b/") for k in ("a//b/", "/b/", "b/", "")] == ["a//b/", "/b/", "b/", ""]
    assert node_entry([{"a": []}, {"a": [1]}], "x/a") == []  # an op with no outputs is found, not passed over
    graph = OpGraph({"dense/MatMul": "MatMul"}, {"dense/MatMul": []})
    joined = Joiner(Vocabulary(["dense"]), [graph])
    assert joined.assign("StatefulPartitionedCall/dense/MatMul") == joined.assign("dense/MatMul") == ("dense", FORWARD)


def test_an_ops_own_name_is_never_taken_for_a_scope():
    """Only the scopes before an op's own name lead to its layer: an op named "gradients" is in the
    backward pass (its name says so) but not the tape's prefix that would hide its layer."""
    graph = OpGraph({"dense/gradients": "Mul", "dense/Mul": "Mul"}, {"dense/gradients": [], "dense/Mul": []})
    joined = Joiner(Vocabulary(["dense"]), [graph])
    assert joined.assign("dense/gradients") == ("dense", BACKWARD)
    assert joined.assign("dense/Mul") == ("dense", FORWARD)


def test_an_optimizers_scope_is_read_as_keras_names_it():
    """Keras 3 names AdamW's scope "adam_w" and LossScaleOptimizer's "loss_scale_optimizer" (names read off a
    real AdamW step of tests/support/projection_run.py's causal LM): the square of a gradient under it is the
    optimizer's scratch, not the backward pass, though the gradient is its only input."""
    from tb_modelmem.rules.join import phase_by_name

    for name in ("StatefulPartitionedCall/adam_w/Square_35", "adam_w_1/Sqrt", "loss_scale_optimizer/mul",
                 "model/adam_w/sub", "rms_prop/x", "sgd_2/Mul_70"):
        assert phase_by_name(name, "Square") == OPTIMIZER, name
    assert phase_by_name("functional_1/dense_4_1/Tensordot/MatMul", "MatMul") == FORWARD
    assert phase_by_name("gradient_tape/functional_1/dense_4_1/MatMul_1", "MatMul") == BACKWARD
    assert phase_by_name("adam_width/MatMul", "MatMul") == FORWARD  # a layer that merely starts so


def test_a_summary_is_the_steps_logging_whatever_scope_it_logs_from():
    """TF1 scripts log each gradient under its own name (``tf.summary.histogram(grad.op.name, grad)``): the
    summary op sits in the "gradients/" scope but encodes a histogram, it computes no gradient."""
    from tb_modelmem.rules.join import phase_by_name

    assert phase_by_name("gradients/dense/MatMul_grad/MatMul_1", "HistogramSummary") == EXECUTOR
    assert phase_by_name("train/gradients/fc1/MatMul_grad/MatMul_1", "MatMul") == BACKWARD
    assert phase_by_name("input_reshape/input", "ImageSummary") == EXECUTOR
