"""The TensorBoard plugin backend. Imports no TensorFlow."""

from tb_modelmem.plugin.loader import ModelMemLoader
from tb_modelmem.plugin.plugin import ModelMemPlugin

__all__ = ["ModelMemLoader", "ModelMemPlugin"]
