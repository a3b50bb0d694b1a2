"""Does a breakdown cost O(variables), not O(parameters)? Capture vs reading every value.

Builds a keras.applications model (weights=None; nothing downloaded) with a built Adam,
then times, in this one process and side by side (median of --repeats):
  breakdown  tb_modelmem.capture.variables.breakdown_of (shapes and dtypes only)
  values     reading every model and optimizer variable's value (what a naive tool would do)
and prints the ratio. Then the scaling check: the same 16-layer Dense stack at width 128
and at width 1024 (64x the parameters, same number of variables); breakdown time should
barely move while reading values grows with the bytes.

    python -m benchmarks.bench_capture [--model ResNet50] [--repeats 5]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras

from benchmarks.timing import median_seconds
from tb_modelmem.capture.variables import breakdown_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ResNet50")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    model = getattr(keras.applications, args.model)(weights=None, input_shape=(64, 64, 3), classes=10)
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    variables = list(model.variables) + list(optimizer.variables)
    params = model.count_params()

    capture = median_seconds(lambda: breakdown_of(model, optimizer), args.repeats)
    values = median_seconds(lambda: [v.numpy() for v in variables], args.repeats)
    total = sum(v.bytes for v in breakdown_of(model, optimizer).variables)
    print(f"{args.model} + Adam: {len(variables)} variables, {params:,} model params, {total / 2**20:.1f} MiB in all")
    print(f"breakdown (shapes/dtypes): {capture * 1e3:8.1f} ms")
    print(f"read every value:          {values * 1e3:8.1f} ms")
    print(f"ratio values / breakdown:  {values / capture:8.1f}x")

    print("\nscaling: 16 Dense layers + Adam, same variable count, 64x the parameters")
    timings = {}
    for width in (128, 1024):
        stack = keras.Sequential([keras.Input((width,))] + [keras.layers.Dense(width) for _ in range(16)])
        opt = keras.optimizers.Adam()
        opt.build(stack.trainable_variables)
        all_vars = list(stack.variables) + list(opt.variables)
        timings[width] = (median_seconds(lambda: breakdown_of(stack, opt), args.repeats),
                          median_seconds(lambda: [v.numpy() for v in all_vars], args.repeats))
        print(f"width {width:5d}: {stack.count_params():>12,} params  breakdown {timings[width][0] * 1e3:7.2f} ms"
              f"  values {timings[width][1] * 1e3:7.2f} ms")
    print(f"breakdown time ratio 1024/128: {timings[1024][0] / timings[128][0]:.2f}x   "
          f"values time ratio: {timings[1024][1] / timings[128][1]:.2f}x")


if __name__ == "__main__":
    main()
