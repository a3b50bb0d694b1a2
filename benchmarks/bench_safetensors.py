"""Reading a safetensors file's breakdown (issue 49) against ``safetensors.safe_open`` listing its tensors' shapes.

The file is a 1 GiB safetensors of ``--tensors`` float32 tensors, written as a sparse file (the header, then
the data's bytes unwritten: both readers read the header only, so this measures what each does with it).
``readers.safetensors`` checks every entry (dtype, shape, offsets within the data, no overlap) and builds a
``Breakdown`` with its layers; the baseline is what a user would write to list the same thing:
``safe_open(path, "pt")`` and each key's ``get_slice(key).get_shape()``. Interleaved; medians of ``--rounds``.

    python -m benchmarks.bench_safetensors [--tensors 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import tempfile

from benchmarks.timing import median_seconds
from tb_modelmem.readers.safetensors import read_safetensors

SIZE = 1 << 30


def write_sparse(path: str, tensors: int) -> None:
    per = SIZE // tensors // 4 * 4
    header, offset = {}, 0
    for i in range(tensors):
        header[f"model.layers.{i // 8}.block{i % 8}.weight"] = {"dtype": "F32", "shape": [per // 4],
                                                                "data_offsets": [offset, offset + per]}
        offset += per
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tensors", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    from safetensors import safe_open

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.safetensors")
        write_sparse(path, args.tensors)

        def baseline() -> int:
            with safe_open(path, "pt") as f:
                return len([f.get_slice(k).get_shape() for k in f.keys()])

        def ours() -> int:
            return len(read_safetensors(path).variables)

        assert baseline() == ours() == args.tensors
        base, mine = [], []
        for _ in range(args.rounds):
            base.append(median_seconds(baseline, 1))
            mine.append(median_seconds(ours, 1))
        base.sort()
        mine.sort()
        b, m = base[len(base) // 2], mine[len(mine) // 2]
        print(f"{os.path.getsize(path) / 2**30:.2f} GiB, {args.tensors:,} tensors")
        print(f"safe_open + get_shape of each  {b * 1000:8.2f} ms")
        print(f"readers.safetensors breakdown   {m * 1000:8.2f} ms   ratio {m / b:.2f}x")


if __name__ == "__main__":
    main()
