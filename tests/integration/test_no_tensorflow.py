"""The plugin backend runs with TensorFlow unimportable (TensorBoard must start fast and without TF)."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import importlib.abc, os, sys, tempfile

    class NoTensorFlow(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "tensorflow" or name.startswith("tensorflow.") or name == "keras":
                raise ImportError("TensorFlow is blocked in this test")

    sys.meta_path.insert(0, NoTensorFlow())
    from tb_modelmem import summary
    from tb_modelmem.schema.records import Breakdown, VariableRecord
    from tests.support.plugin_harness import Served, write_events

    logdir = tempfile.mkdtemp()
    record = Breakdown(source="test", variables=[VariableRecord("d/kernel", "d", [2, 3], "float32", 24, "weight")])
    write_events(os.path.join(logdir, "run"), [(5, summary.pb("storage", record))])
    body = Served(logdir).json("/breakdown", run="run", tag="storage")
    assert body["totals"]["weight"] == 24 and body["step"] == 5, body
    leaked = sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow."))
    assert not leaked, leaked
    print("served without tensorflow")
    """
)


def test_backend_serves_without_tensorflow():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "served without tensorflow" in result.stdout
