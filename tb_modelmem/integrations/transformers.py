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
from typing import Any, Optional, Tuple, Union

from transformers import TrainerCallback

from tb_modelmem.pytorch import Profile


def default_log_dir(output_dir: str) -> str:
    return os.path.expanduser(os.environ.get("TENSORBOARD_LOGGING_DIR") or os.path.join(output_dir, "runs",
                                                                                         "modelmem"))


def unwrapped_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside accelerate's ``AcceleratedOptimizer`` (or any wrapper keeping ``.optimizer``)."""
    while optimizer is not None and not hasattr(optimizer, "state") and hasattr(optimizer, "optimizer"):
        optimizer = optimizer.optimizer
    inner = getattr(optimizer, "optimizer", None)
    return inner if inner is not None and hasattr(inner, "param_groups") else optimizer


class MemoryCallback(TrainerCallback):
    """Records where a ``Trainer``'s memory goes (see the module docstring)."""

    def __init__(self, log_dir: Optional[str] = None,
                 profile_steps: Union[None, int, Tuple[int, int]] = (3, 4), trace_dir: Optional[str] = None) -> None:
        """``trace_dir``: also keep the profiled window's raw Chrome trace there (``pytorch.Profile``)."""
        self.log_dir = log_dir
        self.profile_steps = profile_steps
        self.trace_dir = trace_dir
        self.profile: Optional[Profile] = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       **kwargs: Any) -> None:
        if not state.is_world_process_zero or model is None:
            return
        self.profile = Profile(model, unwrapped_optimizer(optimizer), self.log_dir or default_log_dir(args.output_dir),
                               self.profile_steps, trace_dir=self.trace_dir).start()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.profile is not None:
            self.profile.step()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.profile is not None:
            self.profile.write_storage()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.profile is not None:
            self.profile.stop()
            self.profile = None
