"""JAX without Keras, recorded like Keras: flax (nnx and linen), equinox and optax.

    model = CNN(nnx.Rngs(0))
    tb_modelmem.jax.scope_modules(model)          # before the step is first compiled
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    with tb_modelmem.summary.create_file_writer("logs/run1").as_default():
        tb_modelmem.summary.variables("storage", model=model, optimizer=optimizer, step=0)
        with tb_modelmem.trace("ops", step=3, model=model, optimizer=optimizer):
            train_step(model, optimizer, x, y)

- ``breakdown(model, optimizer)``: every array by its path (``conv1.kernel``), shape, dtype, bytes and
  role, optax's moments as slots of their parameters (``capture.jax_pytrees``); ``summary.variables``
  takes the same arguments;
- ``scope_modules(model)``: names an nnx model's modules in the programs JAX compiles, so each
  instruction of the step is on its module (``capture.flax_scopes``); linen names its own.

No TensorFlow or Keras is imported: the event files are written by ``summary.create_file_writer``.
"""

from __future__ import annotations

from typing import Any

from tb_modelmem.capture.flax_scopes import scope_modules
from tb_modelmem.capture.jax_pytrees import breakdown_of_pytrees
from tb_modelmem.schema.records import Breakdown

__all__ = ["breakdown", "scope_modules"]


def breakdown(model: Any, optimizer: Any = None) -> Breakdown:
    """Every array of ``model`` (an nnx or equinox module, linen's ``variables`` or ``params``, any pytree of
    arrays) and ``optimizer`` (an ``nnx.Optimizer`` or an optax state) by role and layer, as Storage shows it."""
    return breakdown_of_pytrees(model, optimizer)
