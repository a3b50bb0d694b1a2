"""Shadow an object's callable with a wrapper for a while, and put it back: the one mechanism behind
``MemoryCallback``'s fit guard (``_keras_fit.FitGuard``) and the torch profile's annotations
(``capture.torch_profile``). The wrapper is an instance attribute: it shadows a class's method (deleted
on restore, so the method shows again) or replaces an attribute the object had (set back on restore)."""

from __future__ import annotations

from typing import Any, Callable, List, Tuple


class Shadows:
    """Wrappers set on objects, restored newest first; one someone replaced meanwhile is left as it is."""

    def __init__(self) -> None:
        self._set: List[Tuple[Any, str, Callable[..., Any], bool]] = []  # (owner, name, wrapper, owner had it)

    def shadow(self, owner: Any, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """Set ``owner.name`` to ``wrap(owner.name)``, when it is callable."""
        original = getattr(owner, name, None)
        if original is None or not callable(original):
            return
        wrapper = wrap(original)
        setattr(wrapper, "__wrapped__", original)
        own = name in vars(owner)  # an attribute of its own (Keras' train function), else the class's method
        setattr(owner, name, wrapper)
        self._set.append((owner, name, wrapper, own))

    def restore(self) -> None:
        shadows, self._set = self._set, []
        for owner, name, wrapper, own in reversed(shadows):
            if getattr(owner, name, None) is not wrapper:
                continue
            if own:
                setattr(owner, name, getattr(wrapper, "__wrapped__"))
            else:
                delattr(owner, name)
