"""XLA's own memory plan of a compiled Keras-on-JAX training step: the truth a planned peak is checked
against (``compiled.memory_analysis()``, per device), computed by JAX, never by tb_modelmem."""

from __future__ import annotations

from typing import Any, Dict


def memory_analysis(model: Any, x: Any, y: Any) -> Dict[str, int]:
    """XLA's memory plan of the training step as Keras compiles it (``JAXTrainer.make_train_function``:
    the state donated, the state's shardings kept), on a batch placed as Keras places it."""
    import jax
    import keras
    from keras.src.backend.jax.trainer import _distribute_data  # how fit() places a batch

    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in model.optimizer.variables],
        [v.value for v in model.metrics_variables],
    )
    shardings = None
    if keras.distribution.distribution() is not None:
        shardings = (None, model._get_state_sharding_spec())
    step = jax.jit(model.train_step, donate_argnums=0, out_shardings=shardings)
    data = _distribute_data((x, y, None))
    analysis = step.lower(state, data).compile().memory_analysis()
    return {name: int(getattr(analysis, f"{name}_size_in_bytes")) for name in
            ("argument", "output", "alias", "temp", "generated_code")}


def peak(plan: Dict[str, int]) -> int:
    """The bytes a device holds while the step runs: its arguments, its outputs that are not donated
    arguments updated in place, and its temp allocation."""
    return plan["argument"] + plan["output"] - plan["alias"] + plan["temp"]
