"""``MemoryCallback`` for PyTorch Lightning: Storage and profiled steps, like Keras' callback.

    trainer = lightning.Trainer(max_steps=100, callbacks=[MemoryCallback(profile_steps=(3, 4))])

It records the LightningModule's and its optimizers' storage by role once the optimizers hold their
state, at each checkpoint save and when training ends; and profiles training batches
``profile_steps`` (1-based), each whole: the window opens at the end of the batch before the first
(so the next batch's fetch and transfer are in it) and closes at the end of the last
(``tb_modelmem.pytorch.Profile``). Under Lightning, ``training_step`` and the backward pass run inside
``optimizer.step(closure)``: the forward pass is still forward, the update after the closure the
optimizer's (``rules.phases``). ``log_dir`` defaults to ``trainer.log_dir`` (the logger's version
folder, beside its scalars). Only global rank 0 records. Nothing it does stops training.
Works with ``lightning`` and with the older ``pytorch_lightning`` package.
"""

from __future__ import annotations

from typing import Any

from tb_modelmem.integrations._profiled import Profiled


def _callback_base() -> Any:
    """Lightning's ``Callback``: of ``lightning``, else of the standalone ``pytorch_lightning``."""
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback
    return Callback


Callback: Any = _callback_base()


class MemoryCallback(Profiled, Callback):
    """Records where a Lightning run's memory goes (see the module docstring)."""

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if trainer.global_rank == 0:
            optimizers = list(trainer.optimizers)
            self._begin(pl_module, optimizers[0] if len(optimizers) == 1 else optimizers,
                        trainer.log_dir or trainer.default_root_dir)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._iteration_ended()

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
        self._saved()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._end()
