"""Crafted PyTorch files, one per way such a file has harmed a reader (issue 47), and the real files
beside them (``tests/fixtures/torch``: torch.save and memory snapshots of a real CNN, their figures
in ``truth.json``).

``write(folder)`` writes them and returns ``{file name: reason}``, a regular expression each one's
error must match. Pickles are written opcode by opcode (``Pickle``), since no
pickler makes them: a BUILD on a stand-in the unpickler hands out, tuples shared through the memo
as a dict key (hashing one of depth 64 takes 2^64 steps), a list shared through the memo
("billion laughs", 10^9 elements from a few hundred bytes), a tensor that views past its storage.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import zipfile
import zlib
from typing import Callable, Dict, Tuple

from tests.support.paths import FIXTURES

TORCH = os.path.join(FIXTURES, "torch")
TRUTH = json.load(open(os.path.join(TORCH, "truth.json")))
GOOD_CHECKPOINT = "cnn_adam.pt"
GOOD_SNAPSHOT = "cnn_adam_cuda_style.pickle.gz"
HASH_DEPTH = 64  # a key of this depth would hash in 2^64 steps


class Pickle:
    """A protocol-4 pickle written opcode by opcode (``pickletools`` names)."""

    def __init__(self) -> None:
        self.data = bytearray(b"\x80\x04")

    def op(self, raw: bytes) -> "Pickle":
        self.data += raw
        return self

    def glob(self, module: str, name: str) -> "Pickle":
        return self.op(b"c" + module.encode() + b"\n" + name.encode() + b"\n")

    def text(self, value: str) -> "Pickle":
        raw = value.encode("utf-8", "surrogatepass")
        return self.op(b"X" + struct.pack("<I", len(raw)) + raw)

    def int(self, value: int) -> "Pickle":
        return self.op(b"J" + struct.pack("<i", value))

    def put(self, index: int) -> "Pickle":
        return self.op(b"r" + struct.pack("<I", index))

    def get(self, index: int) -> "Pickle":
        return self.op(b"j" + struct.pack("<I", index))

    def stop(self) -> bytes:
        return bytes(self.data + b".")


def shared_tuple(p: Pickle, depth: int) -> Pickle:
    """t0 = (); t(i+1) = (ti, ti), each ti shared through the memo: 2^depth leaves, a few bytes each level."""
    p.op(b")").put(0)
    for i in range(depth):
        p.get(i).get(i).op(b"\x86").put(i + 1)
    return p


def laughing_list(p: Pickle, levels: int = 9, fan: int = 10) -> Pickle:
    """l0 = [0] * fan; l(i+1) = [li] * fan, each li shared through the memo: fan^(levels+1) elements."""
    p.op(b"](" + b"K\x00" * fan + b"e").put(0)
    for i in range(levels):
        p.op(b"](")
        for _ in range(fan):
            p.get(i)
        p.op(b"e").put(i + 1)
    return p


def _checkpoint_with(pickle_bytes: bytes, dst: str, src: str = GOOD_CHECKPOINT) -> None:
    """The good zip checkpoint with its data.pkl replaced."""
    with zipfile.ZipFile(os.path.join(TORCH, src)) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, pickle_bytes if info.filename.endswith("data.pkl") else data)


def _tensor(p: Pickle, key: str, numel: int, offset: int, size: tuple, stride: tuple) -> Pickle:
    """``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())``."""
    p.glob("torch._utils", "_rebuild_tensor_v2").op(b"(")
    p.op(b"(").text("storage").glob("torch", "FloatStorage").text(key).text("cpu").int(numel).op(b"tQ")
    p.int(offset)
    for dims in (size, stride):
        p.op(b"(")
        for d in dims:
            p.op(b"\x8a" + bytes([8]) + d.to_bytes(8, "little"))  # LONG1: any size
        p.op(b"t")
    p.op(b"\x89").glob("collections", "OrderedDict").op(b")R").op(b"tR")
    return p


def _state_dict(p: Pickle, make: Callable[[Pickle], Pickle], key: str = "w") -> bytes:
    """``{key: <what make pushes>}``."""
    p.op(b"}").text(key)
    make(p)
    return p.op(b"s").stop()


def _build_on(module: str, name: str, state: Callable[[Pickle], Pickle]) -> bytes:
    """An allowlisted name, then BUILD on it: what would change the shared stand-in."""
    p = Pickle().glob(module, name)
    state(p).op(b"b0")  # BUILD, then drop it: the checkpoint itself is an empty dict
    return p.op(b"}").stop()


def _snapshot_bytes(segments: Callable[[Pickle], Pickle]) -> bytes:
    p = Pickle().op(b"}").text("segments")
    segments(p)
    return p.op(b"s").text("device_traces").op(b"]s").stop()


def _trace(events: list) -> bytes:
    good = json.loads(gzip.decompress(open(os.path.join(FIXTURES, "torch_h100",
                                                        "resnet50_adamw_b32.pt.trace.json.gz"), "rb").read()))
    good["traceEvents"] = good["traceEvents"][:2000] + events
    return json.dumps(good).encode()


def _gzip_bomb(size: int) -> bytes:
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\0" * (16 << 20)
    return b"".join([deflate.compress(chunk) for _ in range(size // len(chunk))] + [deflate.flush()])


def _safetensors(header: dict, data: bytes = b"", length: int = -1) -> Callable[[], bytes]:
    def make() -> bytes:
        raw = json.dumps(header).encode()
        return struct.pack("<Q", len(raw) if length < 0 else length) + raw + data
    return make


def _dcp_folder(pickle_bytes: Callable[[], bytes]) -> Callable[[str], None]:
    """A torch.distributed.checkpoint folder whose .metadata is ``pickle_bytes()``."""
    def make(path: str) -> None:
        os.makedirs(path)
        with open(os.path.join(path, ".metadata"), "wb") as f:
            f.write(pickle_bytes())
        with open(os.path.join(path, "__0_0.distcp"), "wb") as f:
            f.write(b"\0" * 64)
    return make


def _trainer_folder(optimizer: Callable[[], bytes], accelerate: bool = False) -> Callable[[str], None]:
    """A Trainer checkpoint folder (or Accelerate's save_state) with good weights and a crafted optimizer.pt
    (optimizer.bin)."""
    def make(path: str) -> None:
        os.makedirs(path)
        with open(os.path.join(path, "random_states_0.pkl" if accelerate else "trainer_state.json"), "w") as f:
            f.write("{}")
        with open(os.path.join(path, "model.safetensors"), "wb") as f:
            f.write(_safetensors({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8)())
        _checkpoint_with(optimizer(), os.path.join(path, "optimizer.bin" if accelerate else "optimizer.pt"))
    return make


def _symlink_to_dev_zero(path: str) -> None:
    os.symlink("/dev/zero", path)


def _raw(data: Callable[[], bytes]) -> Callable[[str], None]:
    def make(path: str) -> None:
        with open(path, "wb") as f:
            f.write(data())
    return make


def _zip(data: Callable[[], bytes]) -> Callable[[str], None]:
    return lambda path: _checkpoint_with(data(), path)


def _cases() -> Dict[str, Tuple[Callable[[str], None], str]]:
    """{file name: (what writes it at a path, a regular expression its error matches)}."""
    hash_bomb = "dict key or set element|billion laughs"  # the memo's budget refuses the deep ones first
    build = "sets the attributes"
    laughs = "billion laughs"

    def frame_name_laughs() -> bytes:
        return (laughing_list(Pickle()).op(b"0")
                .op(b"}(").text("segments").op(b"]").text("device_traces").op(b"]]")  # {segments: [], traces: [[
                .op(b"}(").text("action").text("alloc").text("addr").int(1).text("size").int(512).text("frames")
                .op(b"]}").text("name").get(9).op(b"s")  # an entry whose frame's name is the shared list
                .op(b"auaau").stop())

    return {
        # 1. BUILD on what the unpickler hands out: the storage type (itemsize 0 would corrupt every later
        #    checkpoint), _codecs.encode's defaults (through setattr), a dtype
        "build_storage_type.pt": (_zip(lambda: _build_on("torch", "FloatStorage", lambda p: p.op(b"}").text(
            "itemsize").int(0).op(b"s"))), build),
        "build_encode_defaults.pt": (_zip(lambda: _build_on("_codecs", "encode", lambda p: p.op(b"N}").text(
            "__defaults__").text("utf-16").op(b"\x85s\x86"))), build),
        "build_dtype.pt": (_zip(lambda: _build_on("torch", "float32", lambda p: p.op(b"}").text("x").int(1)
                                                  .op(b"s"))), build),
        # 2. hash bombs: a tuple shared through the memo as a dict key, a frozenset element, set() and
        #    OrderedDict() arguments, and one small enough for the memo's budget that still costs 2^12 a hash
        "hash_bomb_key.pt": (_zip(lambda: shared_tuple(Pickle(), HASH_DEPTH).op(b"}").get(HASH_DEPTH).int(1)
                                  .op(b"s").stop()), hash_bomb),
        "hash_bomb_frozenset.pt": (_zip(lambda: shared_tuple(Pickle(), HASH_DEPTH).op(b"(").get(HASH_DEPTH)
                                        .op(b"\x91").stop()), hash_bomb),
        "hash_bomb_set_call.pt": (_zip(lambda: shared_tuple(Pickle(), HASH_DEPTH).glob("builtins", "set").op(b"]")
                                       .get(HASH_DEPTH).op(b"a\x85R").stop()), hash_bomb),
        "hash_bomb_ordered_dict_call.pt": (_zip(lambda: shared_tuple(Pickle(), HASH_DEPTH).glob(
            "collections", "OrderedDict").op(b"]").get(HASH_DEPTH).int(1).op(b"\x86a\x85R").stop()), hash_bomb),
        "hash_bomb_key.pickle": (_raw(lambda: shared_tuple(Pickle(), HASH_DEPTH).op(b"}").get(HASH_DEPTH).int(1)
                                      .op(b"s").stop()), hash_bomb),
        "costly_key.pickle": (_raw(lambda: shared_tuple(Pickle(), 12).op(b"}").get(12).int(1).op(b"s").stop()),
                              "dict key or set element"),
        # 5. billion laughs, where an error message or a walk would expand it
        "laughs_segments.pickle": (_raw(lambda: _snapshot_bytes(lambda p: laughing_list(p))), laughs),
        "laughs_in_int_field.pickle": (_raw(lambda: _snapshot_bytes(
            lambda p: laughing_list(p).op(b"0]}").text("total_size").get(9).op(b"sa"))), laughs),
        "laughs_in_frame_name.pickle": (_raw(frame_name_laughs), laughs),
        "laughs_persistent_id.pt": (_zip(lambda: laughing_list(Pickle()).op(b"0}").text("w").get(9).op(b"Qs")
                                         .stop()), laughs),
        "laughs_state_dict.pt": (_zip(lambda: laughing_list(Pickle()).op(b"0}").text("model").get(9).op(b"s")
                                      .stop()), laughs),
        # 6. a snapshot gzip bomb: refused at the ratio, long before the 1 GiB cap
        "bomb.pickle.gz": (_raw(lambda: _gzip_bomb(512 << 20)), "decompression bomb"),
        # 7. geometry past the storage, a value that holds itself, nesting 100,000 deep
        "shape_past_storage.pt": (_zip(lambda: _state_dict(Pickle(), lambda p: _tensor(
            p, "0", 4, 0, (10 ** 14, 10 ** 14), (10 ** 14, 1)))), "views element"),
        "offset_past_storage.pt": (_zip(lambda: _state_dict(Pickle(), lambda p: _tensor(p, "0", 4, 100, (2,), (1,)))),
                                   "views element"),
        "cycle.pt": (_zip(lambda: Pickle().op(b"]").put(0).get(0).op(b"a").stop()), "after sharing"),
        "deep_nesting.pickle": (_raw(lambda: _snapshot_bytes(lambda p: p.op(b"]" + b"\x85" * 100_000))),
                                "not a PyTorch memory"),
        # the formats issue 49 added: safetensors headers that lie, a DCP .metadata that names a callable, a
        # Trainer folder whose optimizer.pt builds a hash bomb
        "header_past_file.safetensors": (_raw(_safetensors({}, length=1 << 40)), "past the file"),
        "offsets_past_data.safetensors": (_raw(_safetensors(
            {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1 << 30]}}, b"\0" * 16)), "offsets past"),
        "overlapping.safetensors": (_raw(_safetensors(
            {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
             "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, b"\0" * 24)), "overlap"),
        "shape_lies.safetensors": (_raw(_safetensors(
            {"w": {"dtype": "F32", "shape": [10 ** 9, 10 ** 9], "data_offsets": [0, 16]}}, b"\0" * 16)), "needs"),
        "dcp_system": (_dcp_folder(lambda: Pickle().glob("os", "system").text("true").op(b"\x85R").stop()),
                       "names os.system"),
        "trainer_hash_bomb": (_trainer_folder(lambda: shared_tuple(Pickle(), HASH_DEPTH).op(b"}").get(HASH_DEPTH)
                                              .int(1).op(b"s").stop()), hash_bomb),
        "accelerate_system": (_trainer_folder(lambda: Pickle().glob("os", "system").text("true").op(b"\x85R").stop(),
                                              accelerate=True), "names os.system"),
        # 3, 4. what is not a regular file: a symlink to /dev/zero, FIFOs
        **{name: (_symlink_to_dev_zero, "character device") for name in ("z.pt.trace.json", "z.pickle", "z.pt")},
        **{name: (os.mkfifo, "FIFO") for name in ("fifo.pt.trace.json", "fifo.pickle", "fifo.pt")},
    }


CASES = _cases()


def write(folder: str) -> Dict[str, str]:
    """The crafted files in ``folder`` (created), each with a regular expression its error matches."""
    os.makedirs(folder, exist_ok=True)
    for name, (make, _) in CASES.items():
        make(os.path.join(folder, name))
    return {name: reason for name, (_, reason) in CASES.items()}


def write_readable(folder: str) -> Dict[str, str]:
    """Crafted files that are still readable, each with what must be true of it: a lone surrogate in a
    parameter's name (shown escaped), a trace whose malformed events are skipped and counted."""
    os.makedirs(folder, exist_ok=True)
    with zipfile.ZipFile(os.path.join(TORCH, GOOD_CHECKPOINT)) as zf:
        pkl = next(zf.read(m) for m in zf.infolist() if m.filename.endswith("data.pkl"))
    renamed = pkl.replace(b"X\x08\x00\x00\x000.weight", b"X\x08\x00\x00\x00\xed\xa0\x80weigh")
    assert renamed != pkl
    _checkpoint_with(renamed, os.path.join(folder, "surrogate_name.pt"))
    bad_events = [
        {"ph": "i", "name": "[memory]", "pid": [1], "tid": 1, "ts": 1.0, "args": {"Bytes": 8, "Addr": 1}},
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1.0, "args": {"Bytes": 8, "Addr": {"a": 1}}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0,
         "args": {"correlation": [1, 2]}},
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2.0,
         "args": {"Bytes": 8, "Addr": 2, "Total Allocated": 1e308}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::x", "pid": 1, "tid": 1, "ts": 1e300, "dur": 1.0},
    ]
    # well-formed events whose op records lie (readers/torch_shapes.py reads them): each allocation inside them
    # gets no shape, and the trace still reads (no event of these is skipped)
    lying = [("aten::empty", [[]], ["ScalarList"], ["[²]", "9" * 5000]),
             ("aten::cat", [[[2] * 64] * 5000, []], ["TensorList", "Scalar"], ["", "99999999999999999999"]),
             ("aten::embedding", [[1000, 96], [8, "x"]], ["float", "long int"], ["", ""]),
             ("aten::add", [[2 ** 61] * 20_000, [8]], ["float", "float"], ["", ""])]
    for i, (name, dims, types, concrete) in enumerate(lying):
        ts = 10.0 + 10 * i
        bad_events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 5.0,
                           "args": {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete}})
        bad_events.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts + 1,
                           "args": {"Bytes": 4096, "Addr": 100 + i, "Total Allocated": 4096, "Device Type": 0}})
    with open(os.path.join(folder, "malformed_events.pt.trace.json"), "wb") as f:
        f.write(_trace(bad_events))
    # an optimizer.pt whose param group lists a list where a parameter's number goes (unhashable)
    _trainer_folder(lambda: Pickle().op(b"}").text("state").op(b"}s").text("param_groups").op(b"]}").text("params")
                    .op(b"]]").int(0).op(b"aas").text("lr").int(1).op(b"sas").stop())(
        os.path.join(folder, "listed_lists"))
    # a digit a sort by number cannot parse (int("²") raises)
    shutil.copy(os.path.join(folder, "malformed_events.pt.trace.json"),
                os.path.join(folder, "a1\u00b2.1.pt.trace.json"))
    return {"surrogate_name.pt": "\\ud800weigh", "malformed_events.pt.trace.json": "5 malformed events skipped",
            "listed_lists": "not tied to parameters: its param_groups list a parameter twice, or something other"}
