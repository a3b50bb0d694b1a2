"""tb_modelmem: where did my memory go? Public API.

``tb_modelmem.summary`` writes breakdowns and op traces; ``MemoryCallback`` is the Keras callback;
``pytorch`` records a PyTorch model and profiles its loop, ``jax`` a flax, equinox or optax one; ``trace``
profiles a block of steps; ``estimate`` projects a logged step's peak to another batch size, optimizer,
precision or replica count. Names that need TensorFlow are
imported lazily so the TensorBoard plugin (``tb_modelmem.plugin``) loads without it.
"""

from typing import Any

__version__ = "0.1.0"  # the one place the version is written: setup.py reads it
__all__ = ["summary", "MemoryCallback", "pytorch", "jax", "trace", "enable_full_memory_trace", "estimate",
           "__version__"]

_LAZY = {
    "summary": ("tb_modelmem.summary", None),
    "pytorch": ("tb_modelmem.pytorch", None),
    "jax": ("tb_modelmem.jax", None),
    "MemoryCallback": ("tb_modelmem.callbacks", "MemoryCallback"),
    "trace": ("tb_modelmem.tracing", "trace"),
    "enable_full_memory_trace": ("tb_modelmem.tracing", "enable_full_memory_trace"),
    "estimate": ("tb_modelmem.whatif", "estimate"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'tb_modelmem' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    return module if attr is None else getattr(module, attr)
