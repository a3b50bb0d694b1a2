"""Name the module each PyTorch op runs in: a ``record_function`` range around every module's forward,
named by its layer path (``capture.torch_modules.module_layers``), for ``readers.torch_trace`` to read back.

The ranges come from global forward hooks, installed for a whole ``pytorch.Profile`` (``install``) and
emitting only while a profile window is open (``opened``). Installed once, before the model is
compiled, they are compiled with it: ``torch.compile`` traces a module's ``_call_impl`` with the global
hooks in it, so adding them when the window opens would recompile the model inside the window, and a
range entered in a graph would break it, profiling another program than the one training runs. Inside a
compiled graph the hooks do nothing (no range survives compilation there); what names the graph's ops
is a range outside it:

- ``torch.compile(module)``'s wrapper (an ``OptimizedModule``) runs its hooks eagerly: its range is
  its module's (``_orig_mod``);
- a module compiled in place (``module.compile()``) gets a range around its compiled call while the
  window is open (a wrapper on its ``_compiled_call_impl``, put back when the window closes).

Needs torch (the process has it).
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Dict, List, Optional

from tb_modelmem.capture.shadows import Shadows
from tb_modelmem.capture.torch_modules import module_layers
from tb_modelmem.rules.phases import LAYER_ANNOTATION

_installed: Dict[int, "ModuleRanges"] = {}  # id(model) -> its ranges, while a Profile holds them


class ModuleRanges:
    """The hooks naming one model's modules; silent until ``open``."""

    def __init__(self, model: Any) -> None:
        import torch
        from torch.nn.modules import module as nn_module

        self.model = model
        self._layers: Dict[int, str] = module_layers(model)
        self._emitting = False
        self._local = threading.local()
        self._shadows = Shadows()
        compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
        record_function = torch.autograd.profiler.record_function

        # In a graph being compiled, compiling() is a constant: checked first, the hooks guard on nothing else.
        def enter(module: Any, args: Any) -> None:
            if compiling() or not self._emitting:
                return
            path = self._layer_of(module)
            if path is not None:
                ranges = self._local.__dict__.setdefault("open", [])
                ranges.append(record_function(LAYER_ANNOTATION + path))
                ranges[-1].__enter__()

        def leave(module: Any, args: Any, output: Any) -> None:
            if compiling() or not self._emitting:
                return
            ranges = self._local.__dict__.get("open")
            if ranges and self._layer_of(module) is not None:
                ranges.pop().__exit__(None, None, None)

        self._hooks: List[Any] = [nn_module.register_module_forward_pre_hook(enter),
                                  nn_module.register_module_forward_hook(leave, always_call=True)]

    def _layer_of(self, module: Any) -> Optional[str]:
        layer = self._layers.get(id(module))
        return layer if layer is not None else self._layers.get(id(getattr(module, "_orig_mod", None)))

    def open(self) -> None:
        """Ranges from now on; a module compiled in place meanwhile gets its range around its compiled call."""
        from torch.profiler import record_function

        for module in self.model.modules():
            if getattr(module, "_compiled_call_impl", None) is not None and id(module) in self._layers:
                label = LAYER_ANNOTATION + self._layers[id(module)]

                def around(original: Callable[..., Any], label: str = label) -> Callable[..., Any]:
                    @functools.wraps(original)
                    def ranged(*args: Any, **kwargs: Any) -> Any:
                        with record_function(label):
                            return original(*args, **kwargs)

                    return ranged

                self._shadows.shadow(module, "_compiled_call_impl", around)
        self._emitting = True

    def close(self) -> None:
        """No more ranges (those a forward left open, by an exception, are closed)."""
        self._emitting = False
        self._shadows.restore()
        ranges = self._local.__dict__.get("open") or []
        while ranges:
            ranges.pop().__exit__(None, None, None)

    def remove(self) -> None:
        self.close()
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook.remove()
        if _installed.get(id(self.model)) is self:
            del _installed[id(self.model)]


def install(model: Any) -> ModuleRanges:
    """The ranges of ``model``'s modules, installed until ``remove()`` (one set per model)."""
    ranges = _installed.get(id(model))
    if ranges is None:
        ranges = _installed[id(model)] = ModuleRanges(model)
    return ranges


def installed(model: Any) -> Optional[ModuleRanges]:
    """Those a ``pytorch.Profile`` installed for ``model``, if any."""
    return _installed.get(id(model))
