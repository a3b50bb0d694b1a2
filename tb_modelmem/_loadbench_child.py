"""One load for ``tb_modelmem.loadbench``, in a fresh process of its own.

``python -m tb_modelmem._loadbench_child FMT MODE PATH`` loads ``PATH`` as format ``FMT``
(``loadbench.RUNS``), then prints {"seconds", "peak_rss"} as JSON, its last line. Format
"baseline" loads nothing: the process's cost of importing TensorFlow and Keras alone.
"""

from __future__ import annotations

import json
import sys
import time
from typing import List


def peak_rss() -> int:
    """The process's peak resident memory in bytes: VmHWM, else ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def load(fmt: str, mode: str, path: str) -> None:
    import keras
    import tensorflow as tf

    if fmt in ("keras", "h5"):
        keras.models.load_model(path, compile=(mode == "compile=True"))
    elif fmt == "weights":
        with open(path + ".config.json") as f:
            model = keras.models.model_from_json(f.read())
        model.load_weights(path)
    elif fmt == "savedmodel":
        tf.saved_model.load(path)
    elif fmt == "tflite":
        tf.lite.Interpreter(model_path=path).allocate_tensors()


def main(argv: List[str]) -> None:
    fmt, mode, path = argv[:3]
    import keras  # noqa: F401  (the baseline: what importing TensorFlow and Keras costs)
    import tensorflow  # noqa: F401

    start = time.perf_counter()
    load(fmt, mode, path)
    seconds = time.perf_counter() - start if fmt != "baseline" else 0.0
    print(json.dumps({"seconds": seconds, "peak_rss": peak_rss()}))


if __name__ == "__main__":
    main(sys.argv[1:])
