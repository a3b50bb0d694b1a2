"""The log dir users already have: a Keras fit script with only keras.callbacks.TensorBoard
(profile_batch=2), no tb_modelmem code (tests/corpus, --mode plain)."""

from __future__ import annotations

import glob
import os

import pytest
from tensorboard.backend.event_processing import plugin_event_accumulator as event_accumulator

from tests.corpus import make_logdir, run


@pytest.fixture(scope="module")
def plain_logdir(tmp_path_factory) -> str:
    """mnist_convnet trained with keras.callbacks.TensorBoard(logdir, profile_batch=2) only."""
    return make_logdir("mnist_convnet", "plain", tmp_path_factory.mktemp("corpus_plain"))


def test_plain_run_used_no_tb_modelmem_code(plain_logdir):
    result = run("mnist_convnet", "plain")
    assert result["error"] is None, result["error"]["traceback"]
    assert result["fit_calls"][0]["attached"] == "TensorBoard"
    assert not result["tb_modelmem_imported"]


def test_plain_log_dir_has_the_profile(plain_logdir):
    profiles = glob.glob(os.path.join(plain_logdir, "**", "plugins", "profile", "*", "*.xplane.pb"), recursive=True)
    assert profiles, sorted(os.path.relpath(os.path.join(d, f), plain_logdir)
                            for d, _, files in os.walk(plain_logdir) for f in files)
    assert all(os.path.getsize(p) > 0 for p in profiles)


def test_plain_log_dir_has_a_trace_tag(plain_logdir):
    """keras' TensorBoard callback exports the profiled batch with tf.summary.trace_export."""
    plugins = {}
    for run_dir in sorted({os.path.dirname(p) for p in glob.glob(os.path.join(plain_logdir, "**", "*tfevents*"),
                                                                 recursive=True)}):
        events = event_accumulator.EventAccumulator(run_dir, size_guidance={event_accumulator.TENSORS: 0})
        events.Reload()
        for plugin in ("graph_run_metadata_graph", "graph_run_metadata"):
            if plugin not in events.ActivePlugins():
                continue
            for tag in events.PluginTagToContent(plugin):
                plugins.setdefault(plugin, []).append((os.path.relpath(run_dir, plain_logdir), tag))
    assert plugins, "no graph_run_metadata(_graph) tag in the plain log dir"
    assert any(tag == "batch_2" for found in plugins.values() for _, tag in found), plugins

