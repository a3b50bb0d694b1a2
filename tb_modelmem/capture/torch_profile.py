"""Profile PyTorch steps (a plain ``nn.Module``'s, or Keras 3's on the torch backend) with
``torch.profiler``, naming where each op ran.

The torch profiler sees aten ops, not layers: while the window is open, ops run inside
``record_function`` ranges that ``readers.torch_trace`` reads back (a backward op is placed on its
forward op's layer by autograd's sequence number):

- a plain ``nn.Module``: each submodule's forward, named by its ``state_dict`` path as a layer path
  (``capture.torch_modules.module_layers``: ``transformer/h/0/attn``), so ops meet Storage and a
  checkpoint on the same names; the optimizer's step is torch's own ``Optimizer.step#`` range;
- Keras: each layer's ``call``, the model's ``compute_loss`` and ``compute_metrics``, the optimizer's
  ``apply`` and the train function; a model compiled with ``jit_compile=True`` (``torch.compile``), only its
  train function, as the model's own (wrapping what it compiled would make dynamo compile it again).

Module ranges come from ``capture.torch_ranges`` (hooks a ``pytorch.Profile`` installs for its whole life,
so a compiled model is compiled with them; emitting only while a window is open);
Keras' methods are wrapped and put back on stop, also when the window is aborted. ``step()`` marks an
iteration's end (torch's ``ProfilerStep#N`` ranges). Needs torch (the process has it).
"""

from __future__ import annotations

import functools
import os
import socket
from typing import Any, Callable, Optional

from tb_modelmem.capture import torch_ranges
from tb_modelmem.capture.shadows import Shadows
from tb_modelmem.capture.torch_modules import is_module
from tb_modelmem.rules.layers import layer_paths
from tb_modelmem.rules.phases import ITERATION_RANGE, LAYER_ANNOTATION, PHASE_ANNOTATION, STEP_ANNOTATION


class TorchProfiler:
    """One ``torch.profiler.profile`` window over a Keras model's steps (CPU, and CUDA when present)."""

    name = "torch"

    def __init__(self) -> None:
        self._profile: Any = None
        self._shadows = Shadows()
        self._ranges: Optional[torch_ranges.ModuleRanges] = None  # naming the modules' ops this window
        self._own_ranges: Optional[torch_ranges.ModuleRanges] = None  # those installed for this window alone
        self._iteration: Any = None  # the open ITERATION_RANGE of a plain module's loop
        self._iterations = 0

    def start(self, folder: str, model: Any = None, optimizer: Any = None) -> None:
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._folder = folder
        profile = torch.profiler.profile(activities=activities, profile_memory=True, record_shapes=True)
        profile.start()
        self._profile = profile
        if model is not None:
            try:
                if is_module(model):
                    self._annotate_modules(model)
                    self._next_iteration()
                else:
                    self._annotate(model, optimizer)
            except Exception:  # the profile is still worth having, with its ops on no layer
                self._restore()

    def step(self) -> None:
        """An iteration ended: the next ops are the next ``ProfilerStep#N``'s (torch records none without a
        schedule: the range is opened here, as torch names it)."""
        if self._profile is not None and self._iteration is not None:
            self._next_iteration()

    def _next_iteration(self) -> None:
        import torch

        self._end_iteration()
        self._iteration = torch.autograd.profiler.record_function(f"{ITERATION_RANGE}{self._iterations}")
        self._iteration.__enter__()
        self._iterations += 1

    def _end_iteration(self) -> None:
        iteration, self._iteration = self._iteration, None
        if iteration is not None:
            iteration.__exit__(None, None, None)

    def stop(self, save: bool = True) -> None:
        self._end_iteration()
        profile, self._profile = self._profile, None
        self._restore()
        if profile is None:
            return
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the steps' kernels, finished, are in the profile
        profile.stop()
        if save:
            profile.export_chrome_trace(os.path.join(self._folder, f"{socket.gethostname()}.pt.trace.json"))

    def _annotate_modules(self, model: Any) -> None:
        """Each submodule's forward in a range named by its layer path: the ranges a ``pytorch.Profile``
        installed for the model (compiled with it), else some for this window alone."""
        ranges = torch_ranges.installed(model)
        if ranges is None:
            ranges = self._own_ranges = torch_ranges.ModuleRanges(model)
        self._ranges = ranges
        ranges.open()

    def _annotate(self, model: Any, optimizer: Any) -> None:
        if getattr(model, "jit_compile", False) is True:
            # Keras compiles the train function with torch.compile: what runs inside it is left as compiled
            # (a wrapper there would make dynamo compile it again, in the window). Its graphs run as the
            # model's own, their ops opened by the reader and the layers inside unknown.
            self._wrap(model, "train_function", LAYER_ANNOTATION + model.name)
            self._wrap(model, "train_function", STEP_ANNOTATION)
            return
        for path, layer in layer_paths(model):
            self._wrap(layer, "call", LAYER_ANNOTATION + path)
        self._wrap(model, "compute_loss", PHASE_ANNOTATION + "loss")
        self._wrap(model, "compute_metrics", PHASE_ANNOTATION + "metrics")
        self._wrap(model, "train_function", STEP_ANNOTATION)
        optimizers = optimizer if isinstance(optimizer, (list, tuple)) else [optimizer or
                                                                             getattr(model, "optimizer", None)]
        for opt in optimizers:
            if opt is not None:
                self._wrap(opt, "apply", PHASE_ANNOTATION + "optimizer")

    def _wrap(self, owner: Any, attr: str, label: str) -> None:
        from torch.profiler import record_function

        def annotate(original: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(original)
            def annotated(*args: Any, **kwargs: Any) -> Any:
                with record_function(label):
                    return original(*args, **kwargs)

            return annotated

        self._shadows.shadow(owner, attr, annotate)

    def _restore(self) -> None:
        """Put back what was wrapped (what someone replaced meanwhile stays as it is), silence the ranges."""
        self._shadows.restore()
        ranges, self._ranges = self._ranges, None
        if ranges is not None:
            ranges.close()
        own, self._own_ranges = self._own_ranges, None
        if own is not None:
            own.remove()
