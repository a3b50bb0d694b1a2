"""Crafted files never take ``tb-modelmem inspect`` down (issue 12, items 8-10, and more).

Every case is generated here, most from real files TensorFlow and Keras wrote, then broken:
hostile checkpoint indexes (negative, 2**62 and overflowing dimensions, 2**31-1 shards), a
FIFO and /dev/zero where a file belongs, zip bombs, deep JSON, wrong JSON types, HDF5
datasets declaring exabytes over no data, truncations, symlink loops, folders named like
files, links out of an HDF5 file. Each runs the real CLI in a fresh process under an
address-space limit and a timeout, and must end in ONE line on stderr naming the file and
exit code 2, within the time and memory budget below (never by dying on the limit: a
MemoryError is a failure). The worst time and peak RSS are printed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zipfile

import h5py
import numpy as np
import pytest
import tensorflow as tf

from tb_modelmem import proto
from tests.support.inspect_runner import report_worst, run_inspect

BUDGET_S = 10.0  # and must end well within it
BUDGET_RSS = 256 << 20  # plus 6x the file inspected: HDF5 attributes are read whole before their size is known
MEASURED = {}  # case -> (seconds, peak RSS bytes)


# --- real files to break -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A small Keras model + Adam saved in every format, and a TF1 checkpoint with its .meta graph."""
    import keras

    folder = tmp_path_factory.mktemp("real")
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, name="fc1"),
                              keras.layers.BatchNormalization(name="bn"), keras.layers.Dense(2, name="fc2")],
                             name="small")
    model.compile(keras.optimizers.Adam(), "mse")
    model.train_on_batch(np.zeros((2, 6), "float32"), np.zeros((2, 2), "float32"))
    paths = {"keras": str(folder / "m.keras"), "h5": str(folder / "m.h5"), "weights": str(folder / "m.weights.h5"),
             "savedmodel": str(folder / "savedmodel")}
    model.save(paths["keras"])
    model.save(paths["h5"])
    model.save_weights(paths["weights"])
    tf.saved_model.save(model, paths["savedmodel"])
    paths["tf2"] = tf.train.Checkpoint(model=model, optimizer=model.optimizer).save(str(folder / "tf2" / "ckpt"))
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        w = v1.Variable(tf.ones([3, 4]), name="dense/kernel")
        train = v1.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(w * w))
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(train)
            paths["tf1"] = v1.train.Saver().save(sess, str(folder / "tf1" / "model.ckpt"))
    return paths


def copy_checkpoint(prefix, folder, name="ckpt"):
    """The checkpoint's files copied under ``folder/name``; returns the new prefix."""
    src_dir, base = os.path.split(prefix)
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(src_dir):
        if f.startswith(base + "."):
            shutil.copy(os.path.join(src_dir, f), os.path.join(folder, name + f[len(base):]))
    return os.path.join(folder, name)


def replaced(prefix, folder, suffix, make):
    """A copy of the checkpoint at ``prefix`` whose ``suffix`` file is removed and made anew by ``make(path)``."""
    new = copy_checkpoint(prefix, folder)
    os.remove(new + suffix)
    make(new + suffix)
    return new


# --- a tensor bundle index, written byte by byte -------------------------------------------------

def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _block(items):
    body = b"".join(varint(0) + varint(len(k)) + varint(len(v)) + k + v for k, v in items)
    return body + struct.pack("<II", 0, 1)  # one restart point at 0


def index_file(entries, num_shards=1):
    """A LevelDB-style table as TensorFlow writes a checkpoint's .index: header entry "" then
    ``entries`` (key -> BundleEntryProto) in key order."""
    items = [(b"", proto.BundleHeaderProto(num_shards=num_shards).SerializeToString())]
    items += [(k.encode(), e.SerializeToString()) for k, e in sorted(entries.items())]
    data = _block(items)
    out = data + b"\0" + b"\0" * 4
    index = _block([(items[-1][0] + b"\xff", varint(0) + varint(len(data)))])
    index_at = len(out)
    out += index + b"\0" + b"\0" * 4
    meta = _block([])
    meta_at = len(out)
    out += meta + b"\0" + b"\0" * 4
    handles = varint(meta_at) + varint(len(meta)) + varint(index_at) + varint(len(index))
    return out + handles.ljust(40, b"\0") + struct.pack("<Q", 0xDB4775248B80FB57)


def entry(dims, dtype=1, size=None, offset=0, shard_id=0, unknown_rank=False):
    shape = proto.BundleEntryProto().shape.__class__(dim=[{"size": d} for d in dims], unknown_rank=unknown_rank)
    count = int(np.prod(dims, dtype=object)) if dims else 1
    return proto.BundleEntryProto(dtype=dtype, shape=shape, shard_id=shard_id, offset=offset,
                                  size=count * 4 if size is None else size)


def crafted_checkpoint(folder, entries, num_shards=1, data=b"\0" * 64):
    os.makedirs(folder, exist_ok=True)
    prefix = os.path.join(folder, "ckpt")
    with open(prefix + ".index", "wb") as f:
        f.write(index_file(entries, num_shards))
    if data is not None:
        with open(f"{prefix}.data-00000-of-{num_shards:05d}", "wb") as f:
            f.write(data)
    return prefix


def truncated(src, dst, parts):
    """The first 1/``parts`` of the file ``src``, written to ``dst``."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(src, "rb") as f, open(dst, "wb") as out:
        out.write(f.read(os.path.getsize(src) // parts))
    return dst


# --- zip helpers -------------------------------------------------------------------------------

def rezip(src, dst, replace=None, compression=zipfile.ZIP_STORED, extra=()):
    """A copy of a .keras archive with members replaced (name -> bytes) and more added."""
    replace = replace or {}
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression) as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, replace.get(item.filename, zin.read(item.filename)), compression)
        for name, data in extra:
            zout.writestr(name, data, compression)
    return dst


def zip_with_bomb(src, dst, member, gib):
    """``src`` with ``member`` replaced by ``gib`` GiB of JSON white space, deflated (a few MB on disk)."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compresslevel=1) as zout:
        for item in zin.infolist():
            if item.filename != member:
                zout.writestr(item.filename, zin.read(item.filename))
        info = zipfile.ZipInfo(member)
        info.compress_type = zipfile.ZIP_DEFLATED
        with zout.open(info, "w", force_zip64=True) as fh:
            zeros = b"{" + b" " * ((1 << 24) - 1)
            for _ in range(gib * 64):
                fh.write(zeros)
                zeros = b" " * (1 << 24)
    return dst


# --- the cases ---------------------------------------------------------------------------------

def _cases():
    """name -> builder(folder, real files) returning the path to inspect; the error must name it."""
    cases = {}

    def case(fn):
        cases[fn.__name__] = fn
        return fn

    @case
    def index_negative_dimension(folder, real):
        return crafted_checkpoint(folder, {"w": entry([-3, 4], size=48)})

    @case
    def index_dimension_2_pow_62(folder, real):
        return crafted_checkpoint(folder, {"w": entry([2 ** 62], size=16)})

    @case
    def index_overflowing_dimensions(folder, real):
        return crafted_checkpoint(folder, {"w": entry([2 ** 62, 2 ** 62, 2 ** 62], size=16)})

    @case
    def index_rank_300(folder, real):
        return crafted_checkpoint(folder, {"w": entry([1] * 300, size=4)})

    @case
    def index_unknown_rank(folder, real):
        return crafted_checkpoint(folder, {"w": entry([], unknown_rank=True, size=4)})

    @case
    def index_2_pow_31_shards(folder, real):
        return crafted_checkpoint(folder, {"w": entry([4], size=16)}, num_shards=2 ** 31 - 1, data=None)

    @case
    def index_shard_id_out_of_range(folder, real):
        return crafted_checkpoint(folder, {"w": entry([4], shard_id=7)})

    @case
    def index_entry_past_the_data(folder, real):
        return crafted_checkpoint(folder, {"w": entry([1024])})

    @case
    def index_bytes_disagree_with_shape(folder, real):
        return crafted_checkpoint(folder, {"w": entry([4, 4], size=8)})

    @case
    def index_object_graph_garbage(folder, real):
        return crafted_checkpoint(folder, {"_CHECKPOINTABLE_OBJECT_GRAPH": entry([], dtype=7, size=40)},
                                  data=varint(2 ** 40) + b"\xff" * 60)

    @case
    def index_object_graph_not_a_string(folder, real):
        return crafted_checkpoint(folder, {"_CHECKPOINTABLE_OBJECT_GRAPH": entry([4], dtype=1)})

    @case
    def index_empty_file(folder, real):
        prefix = crafted_checkpoint(folder, {})
        open(prefix + ".index", "wb").close()
        return prefix

    @case
    def index_truncated(folder, real):
        prefix = copy_checkpoint(real["tf2"], folder)
        with open(prefix + ".index", "r+b") as f:
            f.truncate(os.path.getsize(prefix + ".index") // 2)
        return prefix

    @case
    def index_random_bytes(folder, real):
        prefix = copy_checkpoint(real["tf2"], folder)
        with open(prefix + ".index", "wb") as f:
            f.write(np.random.default_rng(1).bytes(4096))
        return prefix

    @case
    def index_is_a_fifo(folder, real):
        return replaced(real["tf2"], folder, ".index", os.mkfifo)

    @case
    def index_is_dev_zero(folder, real):
        return replaced(real["tf2"], folder, ".index", lambda path: os.symlink("/dev/zero", path))

    @case
    def index_is_a_sparse_terabyte(folder, real):
        prefix = copy_checkpoint(real["tf2"], folder)
        os.truncate(prefix + ".index", 1 << 40)
        return prefix

    @case
    def index_is_a_folder(folder, real):
        return replaced(real["tf2"], folder, ".index", os.mkdir)

    @case
    def index_is_a_symlink_loop(folder, real):
        return replaced(real["tf2"], folder, ".index", lambda path: os.symlink(path, path)) + ".data-00000-of-00001"

    @case
    def data_shard_is_a_folder(folder, real):
        return replaced(real["tf2"], folder, ".data-00000-of-00001", os.mkdir)

    @case
    def data_shard_truncated(folder, real):
        prefix = copy_checkpoint(real["tf2"], folder)
        os.truncate(prefix + ".data-00000-of-00001", 10)
        return prefix

    @case
    def meta_graph_is_a_fifo(folder, real):
        return replaced(real["tf1"], folder, ".meta", os.mkfifo)

    @case
    def meta_graph_garbage(folder, real):
        prefix = copy_checkpoint(real["tf1"], folder)
        with open(prefix + ".meta", "wb") as f:
            f.write(b"\x0a\xff\xff\xff\xff\x0f" + b"garbage" * 10)
        return prefix

    @case
    def folder_whose_state_file_is_a_fifo(folder, real):
        os.makedirs(folder)
        os.mkfifo(os.path.join(folder, "checkpoint"))
        return folder

    @case
    def keras_config_json_bomb_3_gib(folder, real):
        return zip_with_bomb(real["keras"], os.path.join(folder, "bomb.keras"), "config.json", 3)

    @case
    def keras_weights_bomb(folder, real):
        return zip_with_bomb(real["keras"], os.path.join(folder, "bomb.keras"), "model.weights.h5", 1)

    @case
    def keras_config_nested_100k_deep(folder, real):
        return rezip(real["keras"], os.path.join(folder, "deep.keras"), {"config.json": b"[" * 100_000})

    @case
    def keras_config_nested_objects(folder, real):
        return rezip(real["keras"], os.path.join(folder, "deep.keras"),
                     {"config.json": b'{"config": ' * 50_000 + b"1" + b"}" * 50_000})

    @case
    def keras_config_of_8_mib_of_empty_objects(folder, real):
        """Just under the JSON cap, the most Python objects per byte: the memory a cap allows."""
        return rezip(real["keras"], os.path.join(folder, "wide.keras"),
                     {"config.json": b"[" + b"{}," * ((8 << 20) // 3 - 10) + b"{}]"})

    @case
    def keras_config_a_number(folder, real):
        return rezip(real["keras"], os.path.join(folder, "n.keras"), {"config.json": b"12"})

    @case
    def keras_config_not_utf8(folder, real):
        return rezip(real["keras"], os.path.join(folder, "n.keras"), {"config.json": b"\xff\xfe{\x00"})

    @case
    def keras_weights_not_hdf5(folder, real):
        return rezip(real["keras"], os.path.join(folder, "w.keras"), {"model.weights.h5": b"\x89HDF\r\n\x1a\n" * 8})

    @case
    def keras_truncated(folder, real):
        return truncated(real["keras"], os.path.join(folder, "t.keras"), 2)

    @case
    def keras_local_header_offset_past_the_end(folder, real):
        path = rezip(real["keras"], os.path.join(folder, "o.keras"))
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            at = data.rfind(b"model.weights.h5", 0, data.rfind(b"PK\x05\x06")) - 46 + 42  # central header field
            data[at:at + 4] = struct.pack("<I", len(data) + 10_000)
            f.seek(0)
            f.write(data)
        return path

    @case
    def keras_is_a_fifo(folder, real):
        os.makedirs(folder)
        os.mkfifo(os.path.join(folder, "m.keras"))
        return os.path.join(folder, "m.keras")

    @case
    def keras_is_a_folder(folder, real):
        os.makedirs(os.path.join(folder, "m.keras"))
        return os.path.join(folder, "m.keras")

    @case
    def keras_many_members(folder, real):
        return rezip(real["keras"], os.path.join(folder, "many.keras"), {"config.json": b"[]"},
                     extra=[(f"junk/{i}", b"") for i in range(20_000)])

    @case
    def h5_dataset_declares_8_eib_with_no_data(folder, real):
        os.makedirs(folder)
        path = os.path.join(folder, "big.weights.h5")
        with h5py.File(path, "w") as h5:
            group = h5.create_group("layers/dense/vars")
            group.attrs["name"] = "dense"
            group.create_dataset("0", shape=(2 ** 40, 2 ** 20), dtype="float32", chunks=(1, 1024))
        return path

    def legacy_h5_with_first_weight(folder, real, make):
        """The real legacy .h5 with fc1's first weight removed and made anew by ``make(group, name)``."""
        path = os.path.join(folder, "edited.h5")
        os.makedirs(folder)
        shutil.copy(real["h5"], path)
        with h5py.File(path, "r+") as h5:
            group = h5["model_weights/fc1"]
            name = group.attrs["weight_names"][0]
            del group[name]
            make(group, name)
        return path

    @case
    def legacy_h5_dataset_declares_8_eib(folder, real):
        return legacy_h5_with_first_weight(folder, real, lambda group, name: group.create_dataset(
            name, shape=(2 ** 40, 2 ** 20), dtype="float32", chunks=(1, 1024)))

    @case
    def h5_name_heap_of_1_tib(folder, real):
        """The local heap that keeps the layer names of a .weights.h5 in the order Keras wrote them
        (read to order the layers: issue 31 item 2) claims a terabyte."""
        from h5py import h5o

        path = os.path.join(folder, "heap.weights.h5")
        os.makedirs(folder)
        shutil.copy(real["weights"], path)
        with h5py.File(path, "r") as h5:
            header = h5o.get_info(h5["layers"].id).addr
        raw = bytearray(open(path, "rb").read())
        pos = header + 16  # object header v1: its messages, each type, size, flags, 3 reserved, body
        while struct.unpack_from("<H", raw, pos)[0] != 0x11:  # the symbol table: B-tree, local heap
            pos += 8 + struct.unpack_from("<H", raw, pos + 2)[0]
        heap = struct.unpack_from("<Q", raw, pos + 16)[0]
        struct.pack_into("<Q", raw, heap + 8, 1 << 40)  # its data segment's size
        open(path, "wb").write(bytes(raw))
        return path

    @case
    def h5_weight_of_strings(folder, real):
        path = os.path.join(folder, "s.weights.h5")
        os.makedirs(folder)
        with h5py.File(path, "w") as h5:
            h5.create_group("layers/dense/vars").create_dataset("0", data=np.array([b"a", b"bc"], dtype=object),
                                                                dtype=h5py.string_dtype())
        return path

    @case
    def h5_weight_is_an_external_link_to_a_fifo(folder, real):
        os.makedirs(folder)
        os.mkfifo(os.path.join(folder, "fifo.h5"))
        path = os.path.join(folder, "link.weights.h5")
        with h5py.File(path, "w") as h5:
            h5.create_group("layers/dense/vars")["0"] = h5py.ExternalLink("fifo.h5", "/x")
        return path

    @case
    def legacy_h5_weight_is_a_soft_link_loop(folder, real):
        return legacy_h5_with_first_weight(folder, real, lambda group, name: group.__setitem__(
            name, h5py.SoftLink(group.name + "/" + name)))

    @case
    def h5_truncated(folder, real):
        return truncated(real["h5"], os.path.join(folder, "t.h5"), 3)

    @case
    def h5_model_config_of_40_mib(folder, real):
        path = os.path.join(folder, "c.h5")
        os.makedirs(folder)
        shutil.copy(real["h5"], path)
        with h5py.File(path, "r+") as h5:
            h5.attrs["model_config"] = json.dumps({"class_name": "Sequential", "pad": " " * (40 << 20)})
        return path

    @case
    def h5_is_dev_zero(folder, real):
        os.makedirs(folder)
        os.symlink("/dev/zero", os.path.join(folder, "z.h5"))
        return os.path.join(folder, "z.h5")

    @case
    def savedmodel_pb_is_a_fifo(folder, real):
        shutil.copytree(real["savedmodel"], folder)
        os.remove(os.path.join(folder, "saved_model.pb"))
        os.mkfifo(os.path.join(folder, "saved_model.pb"))
        return folder

    @case
    def savedmodel_pb_is_a_sparse_4_gib(folder, real):
        shutil.copytree(real["savedmodel"], folder)
        os.truncate(os.path.join(folder, "saved_model.pb"), 4 << 30)
        return folder

    @case
    def savedmodel_pb_nested_garbage(folder, real):
        shutil.copytree(real["savedmodel"], folder)
        with open(os.path.join(folder, "saved_model.pb"), "wb") as f:
            f.write(b"\x12\xff\xff\xff\x07" + b"\x12\x05" * 1000)
        return folder

    @case
    def savedmodel_variables_index_negative_dimension(folder, real):
        shutil.copytree(real["savedmodel"], folder)
        crafted_checkpoint(os.path.join(folder, "variables"), {"w": entry([-1], size=4)})
        variables = os.path.join(folder, "variables")
        os.replace(os.path.join(variables, "ckpt.index"), os.path.join(variables, "variables.index"))
        return folder

    return cases


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_crafted_file_is_one_line_naming_it_exit_2(name, real, tmp_path):
    path = CASES[name](str(tmp_path / name), real)
    code, out, err, seconds, rss = run_inspect(path)
    budget_rss = BUDGET_RSS + 6 * (os.path.getsize(path) if os.path.isfile(path) else 0)
    MEASURED[name] = (seconds, rss)
    lines = err.splitlines()
    assert code == 2, (name, code, err[-2000:])
    assert out == "" and len(lines) == 1, (name, err[-2000:])
    named = path if not path.endswith(".data-00000-of-00001") else path[: -len(".data-00000-of-00001")]
    assert lines[0].startswith("tb-modelmem: error: ") and os.path.basename(named) in lines[0], lines[0]
    assert "MemoryError" not in lines[0] and "Traceback" not in err, lines[0]
    assert seconds < BUDGET_S and rss < budget_rss, (name, seconds, rss)


def test_the_real_files_are_fine(real):
    """The files the cases break, unbroken, inspect to exit 0 under the same limits."""
    for fmt in ("keras", "h5", "weights", "savedmodel", "tf2", "tf1"):
        code, out, err, seconds, rss = run_inspect(real[fmt])
        assert code == 0 and "reconciled to the byte" in out, (fmt, err[-2000:])
        MEASURED[f"(real {fmt})"] = (seconds, rss)


def test_worst_time_and_memory_are_reported():
    if not MEASURED:
        pytest.skip("no case ran")
    worst_seconds, _ = report_worst(MEASURED, "crafted inspect")
    assert worst_seconds < BUDGET_S
