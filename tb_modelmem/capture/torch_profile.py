"""Profile Keras 3 steps on the torch backend with ``torch.profiler``, naming where each op ran.

The torch profiler sees aten ops, not Keras layers: while the window is open, each layer's ``call``,
the model's ``compute_loss`` and ``compute_metrics``, the optimizer's ``apply`` and the train function
run inside ``record_function`` ranges that ``readers.torch_trace`` reads back (a backward op is placed
on its forward op's layer by autograd's sequence number). Everything wrapped is put back on stop, also
when the window is aborted. Needs torch (the process has it: Keras runs on it).
"""

from __future__ import annotations

import functools
import os
import socket
from typing import Any, Callable

from tb_modelmem.capture.shadows import Shadows
from tb_modelmem.readers.torch_trace import LAYER_ANNOTATION, PHASE_ANNOTATION, STEP_ANNOTATION
from tb_modelmem.rules.layers import layer_paths


class TorchProfiler:
    """One ``torch.profiler.profile`` window over a Keras model's steps (CPU, and CUDA when present)."""

    name = "torch"

    def __init__(self) -> None:
        self._profile: Any = None
        self._shadows = Shadows()

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
                self._annotate(model, optimizer)
            except Exception:  # the profile is still worth having, with its ops on no layer
                self._restore()

    def stop(self, save: bool = True) -> None:
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
        """Put back what was wrapped (what someone replaced meanwhile stays as it is)."""
        self._shadows.restore()
