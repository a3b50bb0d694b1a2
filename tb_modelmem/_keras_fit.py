"""What ``MemoryCallback`` relies on in Keras' ``fit`` beyond the public ``Callback`` API: the one place.

Keras gives a callback its model (``set_model``), fit's parameters (``set_params``, ``self.params``) and
the ``on_*`` hooks; ``MemoryCallback`` uses those for everything else. Two things it needs have no
public hook:

* **The CallbackList fit made**, to guard the other callbacks' hooks and to see a
  ``keras.callbacks.TensorBoard`` profiling the same batches. Keras hands a callback its model, never
  the list: ``fit_callback_list`` finds the list on the stack while it sets the model.
* **An error raising out of fit** (a step out of memory, a data error, an interrupt, another
  callback's exception, a failing validation). Keras calls no ``on_train_end`` then, yet an open
  profile window must be closed (a profiler left running makes every later profile in the process
  fail). ``FitGuard`` wraps, for the whole fit, what fit calls: ``model.train_function``,
  ``model.evaluate`` and the hooks of fit's CallbackList (``HOOKS``); each wrapper reports the error
  and raises it on, and everything is put back at train end or at the error.

The Keras behaviours this relies on, each with its test in
tests/integration/test_keras_fit_contract.py (TensorFlow backend; tests/integration/test_keras_backends.py
runs MemoryCallback's fits on torch and JAX), which fails if a Keras release changes it:

1. fit wraps the callbacks in a ``CallbackList`` holding ours, whose ``set_model`` calls ours
   (``test_fit_makes_a_callback_list_that_sets_our_model``).
2. fit makes the train function (``make_train_function``) before ``on_train_begin``, keeps it as an
   attribute of the model's own, and calls ``model.train_function`` by attribute at every step: what
   ``on_train_begin`` puts there is what runs (``test_fit_calls_model_train_function_by_attribute``).
3. fit validates through ``model.evaluate``, looked up on the model, passing it fit's CallbackList
   (``test_fit_validates_through_model_evaluate``).
4. fit calls the hooks in ``HOOKS`` it uses on its CallbackList by attribute, so an attribute of the
   list's own shadows the class's method (``test_fit_calls_the_list_hooks_by_attribute``).
5. Keras calls no ``on_train_end`` when fit raises (``test_keras_calls_no_on_train_end_when_fit_raises``):
   the reason for ``FitGuard``. If a release starts calling it, the guard can go.
6. ``keras.callbacks.TensorBoard(profile_batch=(a, b))`` keeps a and b in ``_start_batch`` and
   ``_stop_batch`` (``test_tensorboard_keeps_its_profile_batches``); read by ``profiling_tensorboard``.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Tuple

import keras

from tb_modelmem.capture.shadows import Shadows

# The hooks of fit's callback list that FitGuard wraps.
HOOKS = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end", "on_epoch_begin",
         "on_epoch_end", "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end",
         "on_train_end")
# What FitGuard wraps on the model.
MODEL_CALLS = ("train_function", "evaluate")


def fit_callback_list(callback: Any) -> Any:
    """The ``keras.callbacks.CallbackList`` setting ``callback``'s model, for a call from the callback's
    ``set_model`` (behaviour 1): found on the caller's stack, as the ``self`` of a frame at most four
    up. None when a callback is driven another way (its hooks called by hand): then only the model's
    calls are guarded."""
    frame: Optional[Any] = sys._getframe(1)
    for _ in range(4):
        frame = frame.f_back if frame is not None else None
        owner = frame.f_locals.get("self") if frame is not None else None
        if isinstance(owner, keras.callbacks.CallbackList) and any(c is callback for c in owner.callbacks):
            return owner
    return None


def profiling_tensorboard(callbacks: Any, steps: Tuple[int, int]) -> Optional[Tuple[int, int]]:
    """The batches (start, stop) a ``keras.callbacks.TensorBoard`` in ``callbacks`` (fit's list) profiles,
    when they overlap ``steps`` (behaviour 6); None when there is none."""
    for other in getattr(callbacks, "callbacks", None) or []:
        start, stop = getattr(other, "_start_batch", 0), getattr(other, "_stop_batch", 0)
        if (isinstance(other, keras.callbacks.TensorBoard) and isinstance(start, int) and start > 0
                and start <= steps[1] and steps[0] <= stop):
            return start, stop
    return None


class FitGuard:
    """Wraps what fit calls (behaviours 2-4) so that an error raising out of it is seen on its way:
    ``on_error(error, where)`` runs, then the error goes on unchanged. ``restore`` puts everything back
    (what someone replaced meanwhile is left as it is)."""

    def __init__(self, on_error: Callable[[BaseException, str], None]) -> None:
        self.on_error = on_error
        self._shadows = Shadows()

    def wrap_fit(self, model: Any, callbacks: Any) -> None:
        """Wrap the model's train function and ``evaluate``, and the hooks of fit's list (if known)."""
        for name in MODEL_CALLS:
            self.wrap(model, name, f"in model.{name}")
        if callbacks is not None:
            for name in HOOKS:
                self.wrap(callbacks, name, f"in a callback's {name}")

    def wrap(self, owner: Any, name: str, where: str) -> None:
        on_error = self.on_error

        def guard(original: Callable[..., Any]) -> Callable[..., Any]:
            def guarded(*args: Any, **kwargs: Any) -> Any:
                try:
                    return original(*args, **kwargs)
                except BaseException as e:
                    on_error(e, where)
                    raise

            return guarded

        self._shadows.shadow(owner, name, guard)

    def restore(self) -> None:
        self._shadows.restore()
