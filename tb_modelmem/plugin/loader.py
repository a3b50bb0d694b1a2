"""How TensorBoard loads the plugin (the ``tensorboard_plugins`` entry point), with its flags.

    tensorboard --logdir logs --modelmem_cache_mb 1024 --modelmem_max_profile_mb 2048
"""

from __future__ import annotations

import argparse
from typing import Any

from tensorboard.plugins import base_plugin

from tb_modelmem.plugin.plugin import ModelMemPlugin
from tb_modelmem.plugin.sources.logdir_files import DEFAULT_MAX_PROFILE_BYTES
from tb_modelmem.plugin.store import DEFAULT_CACHE_BYTES


class ModelMemLoader(base_plugin.TBLoader):
    """Adds the plugin's flags to TensorBoard's and builds the plugin with them."""

    def define_flags(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("modelmem")
        group.add_argument("--modelmem_cache_mb", type=int, default=DEFAULT_CACHE_BYTES // 2**20,
                           help="Model Memory tab: memory for decoded and reduced items, in MiB; the least "
                                "recently used are dropped past it (default: %(default)s)")
        group.add_argument("--modelmem_max_profile_mb", type=int, default=DEFAULT_MAX_PROFILE_BYTES // 2**20,
                           help="Model Memory tab: largest profile file (.xplane.pb) it reduces, in MiB "
                                "(default: %(default)s)")

    def fix_flags(self, flags: Any) -> None:
        for name in ("modelmem_cache_mb", "modelmem_max_profile_mb"):
            value = getattr(flags, name, None)
            if value is not None and value < 1:
                raise ValueError(f"--{name} must be at least 1")

    def load(self, context: base_plugin.TBContext) -> ModelMemPlugin:
        flags = context.flags
        cache_mb = getattr(flags, "modelmem_cache_mb", None) or DEFAULT_CACHE_BYTES // 2**20
        profile_mb = getattr(flags, "modelmem_max_profile_mb", None) or DEFAULT_MAX_PROFILE_BYTES // 2**20
        return ModelMemPlugin(context, cache_bytes=cache_mb * 2**20, max_profile_bytes=profile_mb * 2**20)
