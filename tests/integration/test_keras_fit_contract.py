"""The Keras behaviours tb_modelmem._keras_fit relies on beyond the public Callback API, one test each.

Each test drives plain Keras with a probe callback (not MemoryCallback), so a failure here means a Keras
release changed that behaviour: see tb_modelmem/_keras_fit.py for what depends on it.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest

from tb_modelmem import _keras_fit

X = np.zeros((6, 8), "float32")
Y = np.zeros((6,), "int64")  # 3 batches of 2 per epoch


def _model():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
    model.compile(keras.optimizers.SGD(), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _fit(model, probe, epochs=1, **kwargs):
    return model.fit(X, Y, batch_size=2, epochs=epochs, verbose=0, callbacks=[probe], **kwargs)


def test_fit_makes_a_callback_list_that_sets_our_model():
    """1: fit's CallbackList holds our callback and calls our set_model from its own."""
    class Probe(keras.callbacks.Callback):
        found = None

        def set_model(self, model):
            super().set_model(model)
            self.found = self.found or _keras_fit.fit_callback_list(self)

    probe = Probe()
    _fit(_model(), probe)
    assert isinstance(probe.found, keras.callbacks.CallbackList)
    assert any(c is probe for c in probe.found.callbacks)


def test_fit_calls_model_train_function_by_attribute():
    """2: the train function exists at on_train_begin, is an attribute of the model's own, and what
    on_train_begin puts in model.train_function runs at every step."""
    calls = []

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            original = self.model.train_function
            assert callable(original) and "train_function" in vars(self.model)

            def counted(*args, **kwargs):
                calls.append(1)
                return original(*args, **kwargs)

            self.model.train_function = counted

    _fit(_model(), Probe(), epochs=2)
    assert len(calls) == 6


def test_fit_validates_through_model_evaluate():
    """3: fit validates through model.evaluate looked up on the model, given fit's CallbackList."""
    given = []

    class Probe(keras.callbacks.Callback):
        def set_model(self, model):
            super().set_model(model)
            self.fit_list = _keras_fit.fit_callback_list(self)

        def on_train_begin(self, logs=None):
            assert "evaluate" not in vars(self.model)  # the class's method: unguarding deletes ours
            original = self.model.evaluate

            def counted(*args, **kwargs):
                given.append(kwargs.get("callbacks"))
                return original(*args, **kwargs)

            self.model.evaluate = counted

    probe = Probe()
    _fit(_model(), probe, epochs=2, validation_data=(X, Y))
    assert len(given) == 2 and all(c is probe.fit_list for c in given)


def test_fit_calls_the_list_hooks_by_attribute():
    """4: the hooks fit calls on its CallbackList are looked up on the list: an attribute of its own runs."""
    called = set()

    class Probe(keras.callbacks.Callback):
        def set_model(self, model):
            super().set_model(model)
            self.fit_list = _keras_fit.fit_callback_list(self)

        def on_train_begin(self, logs=None):
            for name in _keras_fit.HOOKS:
                original = getattr(self.fit_list, name)

                def counted(*args, _name=name, _original=original, **kwargs):
                    called.add(_name)
                    return _original(*args, **kwargs)

                setattr(self.fit_list, name, counted)

    _fit(_model(), Probe(), validation_data=(X, Y))
    assert all(callable(getattr(keras.callbacks.CallbackList, name)) for name in _keras_fit.HOOKS)
    # on_batch_begin/on_batch_end: Keras 3's fit calls the on_train_batch_* ones; guarded all the same
    assert called >= set(_keras_fit.HOOKS) - {"on_batch_begin", "on_batch_end"}


@pytest.mark.parametrize("where", ["train_function", "callback"])
def test_keras_calls_no_on_train_end_when_fit_raises(where):
    """5: an error out of a step or out of another callback ends fit without on_train_end."""
    ended = []

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            if where == "train_function":
                def failing(*args, **kwargs):
                    raise RuntimeError("step failed")

                self.model.train_function = failing

        def on_train_batch_end(self, batch, logs=None):
            raise RuntimeError("callback failed")

        def on_train_end(self, logs=None):
            ended.append(1)

    with pytest.raises(RuntimeError, match="failed"):
        _fit(_model(), Probe())
    assert ended == []


def test_tensorboard_keeps_its_profile_batches(tmp_path):
    """6: TensorBoard(profile_batch=(a, b)) keeps a and b in _start_batch and _stop_batch."""
    board = keras.callbacks.TensorBoard(str(tmp_path), profile_batch=(3, 5))
    assert (board._start_batch, board._stop_batch) == (3, 5)
    fit_list = keras.callbacks.CallbackList([board])
    assert _keras_fit.profiling_tensorboard(fit_list, (4, 4)) == (3, 5)
    assert _keras_fit.profiling_tensorboard(fit_list, (6, 7)) is None
