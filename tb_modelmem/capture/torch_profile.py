"""Profile PyTorch steps (a plain ``nn.Module``'s, or Keras 3's on the torch backend) with
``torch.profiler``, naming where each op ran.

The torch profiler sees aten ops, not layers: while the window is open, ops run inside
``record_function`` ranges that ``readers.torch_trace`` reads back (a backward op is placed on its
forward op's layer by autograd's sequence number):

- a plain ``nn.Module``: each submodule's forward, named by its ``state_dict`` path as a layer path
  (``capture.torch_modules.module_layers``: ``transformer/h/0/attn``), so ops meet Storage and a
  checkpoint on the same names; the optimizer's step is torch's own ``Optimizer.step#`` range;
- Keras: each layer's ``call``, the model's ``compute_loss`` and ``compute_metrics``, the optimizer's
  ``apply`` and the train function.

Module ranges are opened and closed by global forward hooks registered only while the window is open;
Keras' methods are wrapped and put back on stop, also when the window is aborted. ``step()`` marks an
iteration's end (torch's ``ProfilerStep#N`` ranges). Needs torch (the process has it).
"""

from __future__ import annotations

import functools
import os
import socket
import threading
from typing import Any, Callable, Dict, List

from tb_modelmem.capture.shadows import Shadows
from tb_modelmem.capture.torch_modules import is_module, module_layers
from tb_modelmem.rules.layers import layer_paths
from tb_modelmem.rules.phases import ITERATION_RANGE, LAYER_ANNOTATION, PHASE_ANNOTATION, STEP_ANNOTATION


class TorchProfiler:
    """One ``torch.profiler.profile`` window over a Keras model's steps (CPU, and CUDA when present)."""

    name = "torch"

    def __init__(self) -> None:
        self._profile: Any = None
        self._shadows = Shadows()
        self._hooks: List[Any] = []
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
        """Each submodule's forward in a range named by its layer path, by global forward hooks."""
        import torch
        from torch.nn.modules import module as nn_module

        layers: Dict[int, str] = module_layers(model)
        local = threading.local()

        def enter(module: Any, args: Any) -> None:
            path = layers.get(id(module))
            if path is not None:
                ranges = local.__dict__.setdefault("open", [])
                ranges.append(torch.autograd.profiler.record_function(LAYER_ANNOTATION + path))
                ranges[-1].__enter__()

        def leave(module: Any, args: Any, output: Any) -> None:
            ranges = local.__dict__.get("open")
            if id(module) in layers and ranges:
                ranges.pop().__exit__(None, None, None)

        self._hooks.append(nn_module.register_module_forward_pre_hook(enter))
        self._hooks.append(nn_module.register_module_forward_hook(leave, always_call=True))

    def _annotate(self, model: Any, optimizer: Any) -> None:
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
        """Put back what was wrapped (what someone replaced meanwhile stays as it is), remove the hooks."""
        self._shadows.restore()
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook.remove()
