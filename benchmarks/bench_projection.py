"""How far the What-if projection is from the peak real runs measure (issue 28), beside a formula estimate.

For each model (seed 002's LeNet, keras-io's transformer, MobileNetV2 96x96 with weights=None: Adam; a
GPT-style causal LM and, with keras-hub installed, KerasHub's LlamaCausalLM (issue 38's client), at batch 8
and 128 tokens: AdamW), TF_CPU_ALLOCATOR_USE_BFC=true (every CPU allocation
recorded), ``tests/support/projection_run.py`` trains and profiles one step at the base batch and at 2x, 4x
and 8x (the LM: 4x the batch, and 2x and 4x the sequence length), ``--repeats`` runs each in fresh
processes (the executor's order moves a step's peak from run to run). The base run's trace is projected to
each target (``tb_modelmem.estimate``; the LM also to mixed_bfloat16 and to SGD with momentum) and
compared with the median measured peak there; so is the formula
estimators use (accelerate's ``estimate-memory``: 16 bytes per parameter for Adam in float32, weights +
gradients + two slots, activations ignored).

    python -m benchmarks.bench_projection [--models lenet transformer mobilenet causal_lm llama] [--repeats 2]
        [--runs DIR] [--auto-jit] [--ordered]

``--ordered``: every run, traced and real, with one inter-op thread (TF_NUM_INTEROP_THREADS=1), as a user pins a
step's order: TensorFlow's executor then runs the step's ops in one order, and the chunks BFC hands change less
from run to run (on two inter-op threads, these 2 cores, the held-out LMs' runs of one setting land in two modes,
e.g. 338.1, 338.7 and 393.6 MiB; on one, GPT-2's repeat within 0.6%, though Gemma's still split: docs/WHAT_IF.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

from tests.support.projection_run import AUTO_JIT_FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = {"lenet": 32, "cnn_tutorial": 32, "cnn_dense": 32, "transformer": 16, "mobilenet": 16, "causal_lm": 8,
        "llama": 8, "gpt2_hub": 8, "gemma_hub": 8, "qwen2_hub": 8, "mistral_hub": 8, "neox_hub": 8,
        "lstm_lm": 8, "gru_lm": 8}
# AdamW, at SEQ tokens; "llama" and the held-out "*_hub" LMs (issue 54) need keras-hub (not a test dependency);
# "lstm_lm" and "gru_lm": Keras' recurrent layers, a while loop over the tokens on TensorFlow
LANGUAGE_MODELS = ("causal_lm", "llama", "gpt2_hub", "gemma_hub", "qwen2_hub", "mistral_hub", "neox_hub", "lstm_lm",
                   "gru_lm")
DEFAULT_MODELS = ("lenet", "transformer", "mobilenet", "causal_lm")
SEQ = 128  # the causal LM's traced length
# What each model is projected to, beside its base: (label, what a real run changes, the estimate's arguments)
Target = Tuple[str, Dict[str, int], Dict[str, int]]


def targets(model: str) -> List[Target]:
    base = BASE[model]
    if model in LANGUAGE_MODELS:
        return [(f"batch {4 * base}", {"batch": 4 * base}, {"batch": 4 * base})] + [
            (f"seq {k * SEQ}", {"seq": k * SEQ}, {"seq": k * SEQ}) for k in (2, 4)] + [
            ("bf16", {"policy": "mixed_bfloat16"}, {"policy": "mixed_bfloat16"}),
            ("momentum", {"optimizer": "momentum"}, {"optimizer": "momentum"})]
    return [(f"batch {k * base}", {"batch": k * base}, {"batch": k * base}) for k in (2, 4, 8)]


def samples(model: str) -> int:
    """The dataset every run of ``model`` fits 4 batches of: 4 of its largest batch, the same at every batch, as a
    user's is when only ``batch_size`` changes (Keras holds the arrays in the allocator all through the step: with
    the dataset grown with the batch, the CNN tutorial's runs held 0.7 MiB of it at batch 32 and 19.2 MiB at 256)."""
    return 4 * max([BASE[model]] + [change.get("batch", 0) for _, change, _ in targets(model)])


def run(folder: str, model: str, batch: int, seq: int = SEQ, policy: str = "float32",
        optimizer: str = "") -> Dict[str, int]:
    """One run in a fresh process (none where ``folder`` holds one already): its measured peak and Keras'
    own figures."""
    truth = os.path.join(folder, "truth.json")
    if os.path.exists(truth):
        return _measured(folder, truth)
    extra = ["--seq", str(seq), "--optimizer", optimizer or "adamw"] if model in LANGUAGE_MODELS else []
    extra += ["--policy", policy, "--samples", str(samples(model))]
    subprocess.run([sys.executable, "-m", "tests.support.projection_run", folder, model, str(batch), "--truth", truth,
                    *extra], cwd=ROOT, check=True, capture_output=True, timeout=1200,
                   env=dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT))
    return _measured(folder, truth)


def _measured(folder: str, truth: str) -> Dict[str, int]:
    from tb_modelmem.readers.logdir import read_run

    with open(truth) as f:
        found = json.load(f)
    # TensorFlow's own high-water mark over the step (BFC), else the trace's
    found["peak"] = found.get("allocator_step_peak") or read_run(folder).trace.peak_bytes
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), choices=list(BASE))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--runs", help="keep the runs in this folder, and project the ones already there again "
                                       "rather than run them (a projection change measured in seconds)")
    parser.add_argument("--auto-jit", action="store_true",
                        help="TensorFlow's XLA auto-clustering on the CPU in every run (clusters inside the executor)")
    parser.add_argument("--ordered", action="store_true", help="one inter-op thread in every run: one order of ops")
    args = parser.parse_args()
    if args.auto_jit:  # the runs inherit these: TensorFlow reads them at its start
        os.environ["TF_XLA_FLAGS"] = AUTO_JIT_FLAGS
    if args.ordered:
        os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    import tb_modelmem

    rows: List[str] = []
    with tempfile.TemporaryDirectory() as temporary:
        scratch = args.runs or temporary
        for model in args.models:
            base = BASE[model]
            asked: List[Target] = [("as traced", {}, {})] + targets(model)
            # what the runs were made with, in their folders' names: --runs reuses only runs made alike
            kept = f"{model}_{samples(model)}{'_autojit' if args.auto_jit else ''}{'_ordered' if args.ordered else ''}"
            runs = {label: [run(os.path.join(scratch, f"{kept}_{n}_{r}"), model, **{"batch": base, **change})
                            for r in range(args.repeats)] for n, (label, change, _) in enumerate(asked)}
            params = runs["as traced"][0]["params"]
            formula = 16 * params
            base_peaks = [r["peak"] for r in runs["as traced"]]
            for i, source in enumerate(runs["as traced"]):
                folder = os.path.join(scratch, f"{kept}_0_{i}")
                for label, _, question in asked:
                    peaks = [r["peak"] for r in runs[label]]
                    median = statistics.median(peaks)
                    answer = tb_modelmem.estimate(folder, **question)
                    projected, band = answer["peak_bytes"], answer.get("band")
                    if projected is None:  # unknown, with the reason: a row that says so
                        why = next(iter(answer["unknown"].values()), "")
                        rows.append(f"{model:<12} {base:>5} {label:>10} unknown: {why}")
                        continue
                    error = (projected - median) / median
                    # the allocator band (BFC's chunking of the largest buffer): how many real runs fall in it
                    inside = "no band"
                    if band:
                        low, high = band["low_bytes"], band["high_bytes"]
                        inside = (f"{sum(low <= p <= high for p in peaks)}/{len(peaks)} in "
                                  f"{low / 2**20:.1f}-{high / 2**20:.1f}")
                    rows.append(f"{model:<12} {base:>5} {label:>10} {source['peak'] / 2**20:>10.1f} "
                                f"{projected / 2**20:>10.1f} {median / 2**20:>10.1f} "
                                f"({min(peaks) / 2**20:.1f}-{max(peaks) / 2**20:.1f}) {100 * error:>+7.1f}% "
                                f"{formula / 2**20:>9.1f} {100 * (formula - median) / median:>+7.1f}%  {inside}")
            print(f"# {model}: {params:,} params; base-batch peaks {[round(p / 2**20, 1) for p in base_peaks]} MiB",
                  flush=True)
    print(f"{'model':<12} {'from':>5} {'to':>10} {'traced MiB':>10} {'projected':>10} {'measured':>10} "
          f"{'(range)':>14} {'error':>8} {'formula':>9} {'error':>8}  real runs in the allocator band")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
