"""JAX without Keras, trained as flax's and optax's own examples train, tb_modelmem attached as
docs/JAX.md says, in a process with no TensorFlow or Keras imported:

- ``nnx``: the demo's flax nnx CNN (``demo/jax_runs.py``: Conv-BatchNorm-ReLU, Conv, Linear),
  ``nnx.Optimizer(model, optax.adamw)``, ``nnx.jit`` step, modules named by ``tb_modelmem.jax.scope_modules``;
- ``linen``: a flax linen causal transformer, its ``params`` and optax AdamW's state passed to a
  ``jax.jit`` step, as the flax examples' ``train_step`` does;
- ``sharded``: the linen transformer on 8 host devices, its batch split over them and the state
  replicated (``NamedSharding``), as ``jax.sharding`` tutorials train data-parallel.

    python -m tests.support.flax_run nnx|linen|sharded LOGDIR TRUTH.json

Writes what JAX, flax and optax say of the run (never tb_modelmem's figures) to TRUTH.json: the
pytrees' bytes by kind, XLA's memory plan of the compiled step (``memory_analysis()``; for nnx, also at
batch 64 and 128, with plain SGD, and in bfloat16, what What if is asked), the modules by
path, and whether TensorFlow or Keras was ever imported.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Dict, List

BATCH = 32


def _nbytes(tree: Any) -> int:
    import jax

    return sum(int(leaf.nbytes) for leaf in jax.tree_util.tree_leaves(tree))


def _plan(compiled: Any) -> Dict[str, int]:
    analysis = compiled.memory_analysis()
    return {name: int(getattr(analysis, f"{name}_size_in_bytes")) for name in
            ("argument", "output", "alias", "temp", "generated_code")}


def nnx_run(logdir: str) -> Dict[str, Any]:
    """The demo's flax nnx run (``demo.jax_runs.flax_nnx``), and XLA's plan of its step."""
    import jax
    import optax
    from flax import nnx

    from demo.jax_runs import flax_nnx, nnx_cnn

    model, optimizer, train_step, (x, y) = flax_nnx(os.path.join(logdir, "train"), batch=BATCH)
    # XLA's plan of the same step at other settings: what What if projects to
    other_batches = {str(b): _plan(train_step.lower(model, optimizer, jax.numpy.tile(x, (b // BATCH, 1, 1, 1)),
                                                    jax.numpy.tile(y, b // BATCH)).compile()) for b in (64, 128)}
    sgd = _plan(train_step.lower(model, nnx.Optimizer(model, optax.sgd(1e-3), wrt=nnx.Param), x, y).compile())
    half, half_step = nnx_cnn(dtype=jax.numpy.bfloat16)  # flax's mixed precision: bfloat16 compute, float32 params
    bf16 = _plan(half_step.lower(half, nnx.Optimizer(half, optax.adamw(1e-3), wrt=nnx.Param), x, y).compile())
    opt_state = optimizer.opt_state[0]
    return {"weight_bytes": _nbytes(nnx.state(model, nnx.Param)),
            "non_trainable_bytes": _nbytes(nnx.state(model, nnx.BatchStat)),
            "slot_bytes": _nbytes(opt_state.mu) + _nbytes(opt_state.nu),
            "other_bytes": _nbytes(opt_state.count) + _nbytes(optimizer.step),
            "modules": [name for name, value in vars(model).items() if isinstance(value, nnx.Module)],
            "model_class": type(model).__name__,  # what its own __call__ does outside them (pools, ReLUs)
            "planned": _plan(train_step.lower(model, optimizer, x, y).compile()),
            "planned_by_batch": other_batches, "planned_sgd": sgd, "planned_bf16": bf16}


def linen_run(logdir: str, devices: int = 1, donate: bool = False) -> Dict[str, Any]:
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax

    import tb_modelmem

    vocab, width, seq = 256, 64, 32

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            mask = nn.make_causal_mask(jnp.ones(x.shape[:2]))
            x = x + nn.SelfAttention(num_heads=4, name="attention")(nn.LayerNorm(name="norm1")(x), mask=mask)
            hidden = nn.gelu(nn.Dense(4 * width, name="fc1")(nn.LayerNorm(name="norm2")(x)))
            return x + nn.Dense(width, name="fc2")(hidden)

    class TinyLM(nn.Module):
        @nn.compact
        def __call__(self, ids: Any) -> Any:
            x = nn.Embed(vocab, width, name="embed")(ids)
            for i in range(2):
                x = Block(name=f"block{i}")(x)
            return nn.Dense(vocab, name="head")(nn.LayerNorm(name="norm")(x))

    model = TinyLM()
    ids = jax.random.randint(jax.random.PRNGKey(1), (BATCH, seq), 0, vocab)
    variables = model.init(jax.random.PRNGKey(0), ids)
    tx = optax.adamw(1e-3)
    params = variables["params"]
    if devices > 1:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(jax.devices()[:devices], ("data",))
        params = jax.device_put(params, NamedSharding(mesh, PartitionSpec()))
        ids = jax.device_put(ids, NamedSharding(mesh, PartitionSpec("data")))
    opt_state = tx.init(params)

    def step_of(tx: Any) -> Any:
        """The jitted step under ``tx``: it returns a new copy of the whole state, unless ``donate`` (the params'
        and optimizer state's buffers given back, updated in place)."""
        @functools.partial(jax.jit, donate_argnums=(0, 1) if donate else ())
        def train_step(params: Any, opt_state: Any, ids: Any) -> Any:
            def loss_fn(params: Any) -> Any:
                logits = model.apply({"params": params}, ids[:, :-1])
                return optax.softmax_cross_entropy_with_integer_labels(logits, ids[:, 1:]).mean()

            loss, grads = jax.value_and_grad(loss_fn)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss
        return train_step

    train_step = step_of(tx)
    sgd = optax.sgd(1e-3)
    planned_sgd = _plan(step_of(sgd).lower(params, sgd.init(params), ids).compile())

    planned = _plan(train_step.lower(params, opt_state, ids).compile())
    planned_double = _plan(train_step.lower(params, opt_state, jnp.tile(ids, (2, 1))).compile())
    writer = tb_modelmem.summary.create_file_writer(os.path.join(logdir, "train"))
    with writer.as_default():
        for step in range(1, 5):
            if step == 3:
                with tb_modelmem.trace("ops", step=step, function=train_step, model={"params": params},
                                       optimizer=opt_state, batch_size=BATCH):
                    params, opt_state, loss = train_step(params, opt_state, ids)
                    jax.block_until_ready(loss)
            else:  # not waited on, as a training loop leaves it: trace() waits for it before its window
                params, opt_state, loss = train_step(params, opt_state, ids)
            if step == 1:
                tb_modelmem.summary.variables("storage", model={"params": params}, optimizer=opt_state, step=step)
    writer.close()
    adam = opt_state[0]
    one_device = [_one_copy(leaf) for leaf in jax.tree_util.tree_leaves(params)]
    return {"weight_bytes": _nbytes(params), "weight_bytes_per_device": sum(one_device),
            "slot_bytes": _nbytes(adam.mu) + _nbytes(adam.nu), "other_bytes": _nbytes(adam.count),
            "modules": sorted(params), "devices": len(jax.devices()),
            "param_devices": sorted({len(leaf.sharding.device_set) for leaf in jax.tree_util.tree_leaves(params)}),
            "planned": planned, "planned_sgd": planned_sgd, "planned_double_batch": planned_double}


def _one_copy(array: Any) -> int:
    """Bytes of the piece of ``array`` its first device holds (``addressable_shards``)."""
    return int(array.addressable_shards[0].data.nbytes)


def main(kind: str, logdir: str, truth_path: str) -> None:
    if kind == "sharded":
        os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    truth = nnx_run(logdir) if kind == "nnx" else linen_run(logdir, devices=8 if kind == "sharded" else 1,
                                                             donate=kind == "donated")
    imported: List[str] = [name for name in ("tensorflow", "keras") if name in sys.modules]
    truth.update(kind=kind, imported=imported)
    with open(truth_path, "w") as f:
        json.dump(truth, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
