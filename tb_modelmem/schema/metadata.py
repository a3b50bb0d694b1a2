"""Plugin name, schema version and SummaryMetadata for tb_modelmem. No TF.

Every summary we write carries ``plugin_data.content`` = JSON
``{"version": N, "kind": K}`` so the backend can list what a tag holds
without reading its payload, and reject versions newer than it knows.
"""

from __future__ import annotations

import json
from typing import Tuple

from tensorboard.compat.proto import summary_pb2

PLUGIN_NAME = "modelmem"
SCHEMA_VERSION = 4  # bump when a payload changes incompatibly; older versions stay readable (records.py migrates)

# Payload kinds and what each one holds (see payload.py for the record types).
BREAKDOWN = "breakdown"  # records.Breakdown: variables by role and layer
OPS = "ops"  # records.OpTrace: per-op time and memory of traced steps
LOADBENCH = "loadbench"  # records.LoadBench: load cost per save format
MEMORY = "memory"  # records.MemorySample: process-wide memory at one step (growth over steps or builds)
OOM = "oom"  # records.OomReport: a step that ran out of memory, what the error said and what was in use
KINDS = (BREAKDOWN, OPS, LOADBENCH, MEMORY, OOM)


class MetadataError(ValueError):
    """The summary's plugin metadata is not ours or is too new to read."""


def create_summary_metadata(kind: str, description: str = "") -> summary_pb2.SummaryMetadata:
    """SummaryMetadata for one payload; data_class BLOB_SEQUENCE (a 1-element string tensor)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")
    content = json.dumps({"version": SCHEMA_VERSION, "kind": kind}).encode()
    return summary_pb2.SummaryMetadata(
        summary_description=description,
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=PLUGIN_NAME, content=content),
        data_class=summary_pb2.DATA_CLASS_BLOB_SEQUENCE,
    )


def parse_plugin_metadata(content: bytes) -> Tuple[int, str]:
    """Return (version, kind) from ``plugin_data.content``, or raise MetadataError."""
    try:
        meta = json.loads(bytes(content).decode("utf-8"))
        version, kind = meta["version"], meta["kind"]
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: "[[[[..." content
        raise MetadataError("not tb_modelmem metadata (unreadable plugin content)") from None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1 or not isinstance(kind, str):
        raise MetadataError("not tb_modelmem metadata (version must be an integer >= 1, kind a string)")
    if version > SCHEMA_VERSION:
        raise MetadataError(
            f"written by a newer tb_modelmem (schema {version} > {SCHEMA_VERSION}); "
            "upgrade tb_modelmem to read it"
        )
    if kind not in KINDS:
        raise MetadataError(f"unknown payload kind {kind[:40]!r}")
    return version, kind
