"""``MemoryCallback`` for Hugging Face ``Trainer``: Storage and profiled steps, like Keras' callback.

    trainer = Trainer(model, args, train_dataset=ds, callbacks=[MemoryCallback(profile_steps=(3, 4))])

It records the model's and optimizer's storage by role once the optimizer holds its state, at each
checkpoint save and when training ends; and profiles optimizer steps ``profile_steps`` (1-based,
``state.global_step``), each whole: the window opens at the end of the step before the first (so the
next batch's fetch is in it) and closes at the end of the last (``tb_modelmem.pytorch.Profile``).
``log_dir`` defaults to ``$TENSORBOARD_LOGGING_DIR``, else ``<output_dir>/runs/modelmem``: a run beside
the ones Trainer's TensorBoard callback writes under ``<output_dir>/runs``. Only the main process
records. Nothing it does stops training: a capture that fails warns.
"""

from __future__ import annotations

import os
from typing import Any

from transformers import TrainerCallback

from tb_modelmem.capture.torch_modules import unwrapped_optimizer
from tb_modelmem.integrations._profiled import Profiled


def default_log_dir(output_dir: str) -> str:
    return os.path.expanduser(os.environ.get("TENSORBOARD_LOGGING_DIR") or os.path.join(output_dir, "runs",
                                                                                         "modelmem"))


class MemoryCallback(Profiled, TrainerCallback):
    """Records where a ``Trainer``'s memory goes (see the module docstring)."""

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       **kwargs: Any) -> None:
        if state.is_world_process_zero and model is not None:
            self._begin(model, unwrapped_optimizer(optimizer), default_log_dir(args.output_dir))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._iteration_ended()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._saved()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._end()
