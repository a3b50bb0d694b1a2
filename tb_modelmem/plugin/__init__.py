"""The TensorBoard plugin backend. Imports no TensorFlow."""

from tb_modelmem.plugin.plugin import ModelMemPlugin

__all__ = ["ModelMemPlugin"]
