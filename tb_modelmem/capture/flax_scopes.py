"""Name a flax nnx model's modules in the programs JAX compiles, as linen and Keras name theirs.

nnx puts no module names in JAX's name stacks: every instruction of a step reads
``jit(step)/transpose(jvp())/conv_general_dilated``, on no module. ``scope_modules(model)`` gives each
module of ``model`` its layer path (``jax_pytrees.module_paths``: ``conv1``, ``blocks/0/attn``, the
model's own class for the model) and wraps its class's ``__call__`` so that a call enters
``jax.named_scope`` of that path, relative to the module it is called from: the step's name stacks then
read ``jit(step)/transpose(jvp(CNN))/conv1/conv_general_dilated``, which ``rules.name_stacks`` and
``rules.join`` place on layer ``conv1`` of the breakdown ``jax_pytrees`` takes, by the same names.

The path is a plain attribute of each module (static, so it survives ``nnx.jit``'s split and merge into
the copies the compiled step calls); a class's ``__call__`` is wrapped once, and calls of its instances
that carry no path (another model's) run unchanged. Only ``__call__`` is named: a module used through
another method keeps its caller's scope. Apply it before the step is first compiled (``nnx.jit`` compiles
on the first call; applied later, the next call compiles again, with the names).
"""

from __future__ import annotations

import functools
import threading
from typing import Any, List

from tb_modelmem.capture.jax_pytrees import module_paths

_PATH = "_tb_modelmem_layer"  # the attribute holding a module's layer path
_CALLING = threading.local()  # .paths: the layer paths of the named modules being called, outermost first


def scope_modules(model: Any) -> Any:
    """Name every module of ``model`` (a flax nnx ``Module``) in the programs its calls compile to;
    returns ``model``. Idempotent."""
    for layer, module in module_paths(model):
        setattr(module, _PATH, layer)
        _wrap(type(module))
    return model


def _wrap(cls: type) -> None:
    """Wrap ``cls.__call__`` (its own or inherited) once, so named instances enter their scope."""
    original = getattr(cls, "__call__", None)
    if original is None or getattr(original, _PATH, False):  # none, or wrapped here or in a base class
        return

    @functools.wraps(original)
    def named_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        path = vars(self).get(_PATH) if hasattr(self, "__dict__") else None
        if not isinstance(path, str):
            return original(self, *args, **kwargs)
        import jax

        paths: List[str] = getattr(_CALLING, "paths", None) or []
        caller = paths[-1] if paths else ""
        relative = path[len(caller) + 1:] if caller and path.startswith(caller + "/") else path
        _CALLING.paths = paths + [path]
        try:
            with jax.named_scope(relative):
                return original(self, *args, **kwargs)
        finally:
            _CALLING.paths = paths

    setattr(named_call, _PATH, True)
    cls.__call__ = named_call  # type: ignore[method-assign]
