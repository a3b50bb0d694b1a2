"""The demo's JAX run without Keras, in a process of its own with TensorFlow and Keras blocked from it (a
flax user's process has neither):

  flax_nnx              a flax nnx CNN (Conv-BatchNorm-ReLU, Conv, Linear) trained with
                        ``nnx.Optimizer(model, optax.adamw(...))`` and an ``nnx.jit`` step: Storage by
                        variable path, step 3 traced with each instruction on its module
                        (``tb_modelmem.jax.scope_modules``) and XLA's planned peak split by role

    python -m demo.jax_runs LOGDIR

Skipped when flax or optax is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Tuple

from demo.torch_runs import NoTensorFlow


def nnx_cnn(channels: Tuple[int, int] = (32, 64), dtype: Any = None) -> Tuple[Any, Any]:
    """(the model, its ``nnx.jit`` train step): the CNN of flax's own MNIST tutorial, with BatchNorm; ``dtype``:
    what its layers compute in (flax's mixed precision: ``jnp.bfloat16`` with float32 parameters)."""
    import optax
    from flax import nnx

    class CNN(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            kw = {"rngs": rngs, "dtype": dtype}
            self.conv1 = nnx.Conv(1, channels[0], (3, 3), **kw)
            self.bn = nnx.BatchNorm(channels[0], **kw)
            self.conv2 = nnx.Conv(channels[0], channels[1], (3, 3), **kw)
            self.head = nnx.Linear(channels[1] * 7 * 7, 10, **kw)

        def __call__(self, x: Any) -> Any:
            x = nnx.avg_pool(nnx.relu(self.bn(self.conv1(x))), (2, 2), (2, 2))
            x = nnx.avg_pool(nnx.relu(self.conv2(x)), (2, 2), (2, 2))
            return self.head(x.reshape(x.shape[0], -1))

    @nnx.jit
    def train_step(model: CNN, optimizer: nnx.Optimizer, x: Any, y: Any) -> Any:
        def loss_fn(model: CNN) -> Any:
            return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    return CNN(nnx.Rngs(0)), train_step


def flax_nnx(logdir: str, batch: int = 32, steps: int = 4, traced: int = 3) -> Tuple[Any, Any, Any]:
    """Train the CNN ``steps`` steps, recording Storage after the first and tracing step ``traced``;
    (model, optimizer, step function, batch) for a caller that asks XLA about the same step."""
    import jax
    import optax
    from flax import nnx

    import tb_modelmem

    model, train_step = nnx_cnn()
    tb_modelmem.jax.scope_modules(model)  # before the step first compiles
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    x = jax.random.normal(jax.random.PRNGKey(1), (batch, 28, 28, 1))
    y = jax.random.randint(jax.random.PRNGKey(2), (batch,), 0, 10)
    writer = tb_modelmem.summary.create_file_writer(logdir)
    with writer.as_default():
        for step in range(1, steps + 1):
            if step == traced:
                with tb_modelmem.trace("ops", step=step, model=model, optimizer=optimizer, batch_size=batch):
                    jax.block_until_ready(train_step(model, optimizer, x, y))
            else:
                jax.block_until_ready(train_step(model, optimizer, x, y))
            if step == 1:  # the optimizer holds its state
                tb_modelmem.summary.variables("storage", model=model, optimizer=optimizer, step=step)
    writer.close()
    return model, optimizer, train_step, (x, y)


if __name__ == "__main__":
    if importlib.util.find_spec("flax") is None or importlib.util.find_spec("optax") is None:
        print("      (flax or optax is not installed: the JAX run is skipped)")
        sys.exit(0)
    sys.meta_path.insert(0, NoTensorFlow(("tensorflow", "keras")))
    flax_nnx(os.path.join(sys.argv[1], "flax_nnx"))
