"""The Keras 3 slot order tb_modelmem replays for weight files is Keras' own, and still current.

``tb_modelmem/rules/_keras_slots.py`` is generated from Keras by ``scripts/gen_keras_slots.py``;
these tests regenerate it against the installed Keras (drift fails), then check every plan
of every optimizer on a real model's weights against what the optimizer's own variables are named by
Keras (``add_variable_from_reference``: "<weight path>_<slot>"), not against tb_modelmem's capture.
"""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import pytest

from tb_modelmem.rules import _keras_slots, roles

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_generated_table_matches_the_installed_keras():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_keras_slots.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert _keras_slots.KERAS_VERSION == keras.__version__


def test_every_built_in_optimizer_is_described():
    """Every optimizer class keras.optimizers exports is in the table, or skipped with a reason."""
    exported = {name for name, cls in vars(keras.optimizers).items()
                if isinstance(cls, type) and issubclass(cls, keras.optimizers.Optimizer)
                and cls is not keras.optimizers.Optimizer}
    assert exported == set(_keras_slots.OPTIMIZERS) | set(_keras_slots.SKIPPED)
    assert {"Adadelta", "Adafactor", "Muon", "Lion", "LossScaleOptimizer"} <= set(_keras_slots.OPTIMIZERS)


def real_weights():
    """Trainable weights of real layers of every rank, an embedding among them."""
    inputs = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(50, 6, name="embedding")(inputs)
    x = keras.layers.Conv1D(4, 3, name="conv")(x)
    x = keras.layers.LayerNormalization(name="norm")(x)
    x = keras.layers.Reshape((3, 4, 1))(x)
    x = keras.layers.Conv2D(2, 2, name="conv2d")(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(3, name="dense")(x)
    return keras.Model(inputs, outputs, name="real").trainable_variables


def _cases():
    for cls, entry in _keras_slots.OPTIMIZERS.items():
        if "wraps" in entry:
            continue
        for key in entry["plans"]:
            yield pytest.param(cls, key, id=f"{cls}[{key}]")


def _named_slot(variable, weights, optimizer):
    """What Keras itself says a variable of an optimizer is, by the name ``add_variable_from_reference`` gives
    it: "<the weight's path, '/' as '_'>_<slot>" is that weight's slot (the longest path that names it wins).
    Adafactor names its factored moments by the weight's bare name ("kernel"): those are in its own lists
    ``_r`` and ``_c``, aligned with ``_trainable_variables``. Any other ("iteration", "learning_rate") is the
    optimizer's own state."""
    name = variable.name
    owners = [(i, w.path.replace("/", "_") + "_") for i, w in enumerate(weights)]
    found = max(((i, prefix) for i, prefix in owners if name.startswith(prefix)), key=lambda f: len(f[1]),
                default=None)
    if found:
        return "slot", (found[0], name[len(found[1]):])
    for attr in ("_r", "_c"):
        for i, slot in enumerate(getattr(optimizer, attr, None) or ()):
            if slot is variable:
                return "slot", (i, attr[1:])
    return "state"


@pytest.mark.parametrize("class_name, key", list(_cases()))
def test_plan_replays_what_keras_builds_on_real_weights(class_name, key):
    entry = _keras_slots.OPTIMIZERS[class_name]
    cls = getattr(keras.optimizers, class_name)
    defaults = cls().get_config()
    on = set(filter(None, key.split("+")))
    def flipped(default):
        return not default if isinstance(default, bool) else (2 if default is None else 0.5)

    config = {flag: (defaults[flag] if (flag in on) == bool(defaults[flag]) else flipped(defaults[flag]))
              for flag in entry["flags"]}
    weights = real_weights()
    optimizer = cls(**config)
    optimizer.build(weights)
    expected = [_named_slot(v, weights, optimizer) for v in optimizer.variables]
    stored = [roles.Stored([int(d) for d in v.shape], str(v.dtype)) for v in optimizer.variables]
    layout = roles.keras_layout([(w.path, [int(d) for d in w.shape], str(w.dtype)) for w in weights], stored,
                                [(class_name, {**defaults, **config}, optimizer.name)])
    assert layout is not None and layout.flags == key
    assert [e if e[0] == "slot" else "state" for e in layout.entries] == expected


def test_a_stored_layout_no_plan_explains_is_refused():
    weights = [("d/kernel", [4, 3], "float32"), ("d/bias", [3], "float32")]
    stored = [roles.Stored([], "int64"), roles.Stored([], "float32"), roles.Stored([4, 3], "float32"),
              roles.Stored([7], "float32")]
    assert roles.keras_layout(weights, stored, [("Adam", {}, "adam")]) is None


def test_names_decide_when_shapes_cannot():
    """RMSprop(momentum) and RMSprop(centered) store the same shapes; a checkpoint's names tell them apart."""
    weights = [("m/d/kernel", [4, 3], "float32")]
    state = [roles.Stored([], "int64", "rmsprop/iteration"), roles.Stored([], "float32", "rmsprop/learning_rate")]
    for second in ("momentum", "average_gradient"):
        stored = state + [roles.Stored([4, 3], "float32", f"rmsprop/m_d_kernel_{n}") for n in ("velocity", second)]
        layout = roles.keras_layout(weights, stored, [("", None, "rmsprop")])
        assert [e[1][1] for e in layout.entries if e[0] == "slot"] == ["velocity", second]
    shapes_only = [roles.Stored(s.shape, s.dtype) for s in stored]
    layout = roles.keras_layout(weights, shapes_only, [("", None, "rm_sprop")])
    assert layout.also, "without names or config the other fitting plan is reported"


def test_a_step_counter_is_other_in_every_source():
    """tf.Variable(1) is 'trainable' to TF, but no gradient updates an integer: a counter."""
    assert roles.role("step", "int32", [], trainable=True) == roles.OTHER
    assert roles.role("step", "int32", [], trainable=None) == roles.OTHER
    assert roles.role("table", "int32", [10], trainable=None) == roles.NON_TRAINABLE
    assert roles.role("bn/moving_mean", "float32", [4], trainable=None) == roles.NON_TRAINABLE
    assert roles.role("dense/kernel", "float32", [4, 3], trainable=None) == roles.WEIGHT
    assert roles.role("dense/kernel", "int8", [4, 3], trainable=False, keras_state=True) == roles.NON_TRAINABLE
