"""Receivers decode compressed images: a Connection hands on the images a
batch of JPEG streams declares (streams made here by Pillow, an encoder of
its own), in the layout declared, with the rest of the batch after them;
decompress_threads=0 keeps the streams; a malformed compressed batch is
skipped and counted, and the next one comes."""

import io

import numpy as np
import pytest

import tensorcom

Image = pytest.importorskip("PIL.Image")


def streams_of(images, planar=False, quality=95):
    """The three tensors (and their infos) of images (n, h, w, 3) as Pillow encodes them."""
    encoded = []
    for image in images:
        buf = io.BytesIO()
        Image.fromarray(image).save(buf, "JPEG", quality=quality, subsampling=0)
        encoded.append(buf.getvalue())
    offsets = np.cumsum([0] + [len(e) for e in encoded]).astype(np.int32)
    shape = images.shape if not planar else (len(images), 3) + images.shape[1:3]
    arrays = [np.frombuffer(b"".join(encoded), np.uint8), offsets, np.array(shape, np.int32)]
    return arrays, ["jpegchw" if planar else "jpeg", "imgoff", "imgshape"]


def pillow_pixels(arrays):
    streams, offsets = arrays[0], arrays[1]
    return np.stack([np.asarray(Image.open(io.BytesIO(streams[offsets[i]:offsets[i + 1]].tobytes())))
                     for i in range(len(offsets) - 1)])


def images(n=3, h=20, w=28, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    out = np.empty((n, h, w, 3), np.uint8)
    for i in range(n):
        for c in range(3):
            out[i, :, :, c] = np.clip(60 + 4 * x + 3 * y * (c + 1) + rng.integers(-3, 4, (h, w)), 0, 255)
    return out


@pytest.fixture
def pair(ipc_dir):
    url = f"ipc://{ipc_dir}/wire"
    made = []

    def make(**receiver):
        sender = tensorcom.Connection(f"zpush+{url}", timeout=10)
        made.append(sender)
        receiver = tensorcom.Connection(f"zpull+{url}", timeout=10, **receiver)
        made.append(receiver)
        return sender, receiver
    yield make
    for c in made:
        c.close()


@pytest.mark.parametrize("planar", [False, True])
def test_the_receiver_decodes_what_the_streams_hold(pair, planar):
    sender, receiver = pair()
    pictures = images()
    arrays, infos = streams_of(pictures, planar)
    labels = np.array([4, 5, 6], np.int32)
    sender.send(arrays + [labels], infos=infos + [""])
    batch, got_infos = receiver.recv(infos=True)
    assert got_infos == ["", ""]
    expected = pillow_pixels(arrays)
    if planar:
        expected = expected.transpose(0, 3, 1, 2)
    assert batch[0].dtype == np.uint8 and batch[0].shape == expected.shape
    assert np.array_equal(batch[0], expected)  # libjpeg-turbo both sides: the same pixels
    assert np.array_equal(batch[1], labels)
    assert receiver.stats.bytes == sum(a.nbytes for a in arrays) + labels.nbytes  # what came over the wire


def test_decompress_threads_zero_keeps_the_streams(pair):
    sender, receiver = pair(decompress_threads=0)
    arrays, infos = streams_of(images())
    sender.send(arrays, infos=infos)
    batch, got_infos = receiver.recv(infos=True)
    assert got_infos == infos
    assert all(np.array_equal(a, b) for a, b in zip(batch, arrays))


def spoiled(how):
    arrays, infos = streams_of(images(n=2, h=16, w=16))
    streams, offsets, shape = arrays
    if how == "truncated":
        arrays = [np.concatenate([streams[:offsets[1] - 30], streams[offsets[1]:]]),
                  np.array([0, offsets[1] - 30, offsets[2] - 30], np.int32), shape]
    elif how == "other size":
        arrays = [streams, offsets, np.array([2, 16, 24, 3], np.int32)]
    elif how == "offsets out of range":
        arrays = [streams, offsets + 5, shape]
    elif how == "bomb":
        arrays = [streams, offsets, np.array([2, 65535, 65535, 3], np.int32)]
    return arrays, infos


@pytest.mark.parametrize("how, words", [
    ("truncated", "image 0"),
    ("other size", "where the batch declares 24x16 RGB"),
    ("offsets out of range", "offsets span bytes"),
    ("bomb", "over the limit"),
])
def test_a_malformed_compressed_batch_is_skipped_and_counted(pair, how, words, capfd):
    sender, receiver = pair()
    arrays, infos = spoiled(how)
    sender.send(arrays, infos=infos)
    good, good_infos = streams_of(images(seed=9))
    sender.send(good, infos=good_infos)
    batch = receiver.recv()
    assert batch[0].shape == (3, 20, 28, 3)  # the next batch, decoded
    assert receiver.malformed == {"compressed images": 1}
    assert words in capfd.readouterr().err


def test_the_option_is_checked():
    with pytest.raises(tensorcom.ArgumentError, match="decompress_threads must not be negative"):
        tensorcom.Connection("zpull+ipc:///nowhere/x", decompress_threads=-1)


def test_tenbin_record_keeps_the_streams(ipc_dir, tmp_path):
    import os
    import subprocess
    tenbin = os.path.join(os.environ.get("TENSORCOM_BUILD_DIR", ""), "tools", "tenbin")
    if not os.access(tenbin, os.X_OK):
        pytest.skip(f"{tenbin} is not built")
    url = f"ipc://{ipc_dir}/record"
    out = tmp_path / "c.ten"
    recorder = subprocess.Popen([tenbin, "record", f"zpull+{url}", "-n", "2", "-o", str(out), "-t", "20"],
                                stderr=subprocess.PIPE, text=True)
    sender = tensorcom.Connection(f"zpush+{url}", timeout=20)
    try:
        for seed in (1, 2):
            arrays, infos = streams_of(images(seed=seed))
            sender.send(arrays, infos=infos)
        _, err = recorder.communicate(timeout=60)
    finally:
        sender.close()
    assert recorder.returncode == 0 and "2 batches, 6 samples" in err, err
    info = subprocess.run([tenbin, "info", str(out)], capture_output=True, text=True, check=True).stdout
    assert [line.split("\t")[4] for line in info.splitlines()] == ["jpeg", "imgoff", "imgshape"] * 2, info


def test_a_server_on_the_lossless_wire_sends_the_raw_wires_pixels(ipc_dir, tmp_path):
    """serve-imagenet-shards --wire zstd and --wire raw, seeded alike: the
    Connection gives back the same images, bit for bit, in both layouts."""
    import os
    import subprocess
    import tarfile
    exe = os.path.join(os.environ.get("TENSORCOM_BUILD_DIR", ""), "servers", "serve-imagenet-shards")
    if not os.access(exe, os.X_OK):
        pytest.skip(f"{exe} is not built")
    shard = tmp_path / "photos.tar"
    with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i, picture in enumerate(images(n=12, h=60, w=80, seed=4)):
            buf = io.BytesIO()
            Image.fromarray(picture).save(buf, "JPEG", quality=90)
            for ext, data in (("jpg", buf.getvalue()), ("cls", b"1")):
                info = tarfile.TarInfo(f"p{i:03d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    for layout in ("BHWC", "BCHW"):
        received = {}
        for wire in ("raw", "zstd"):
            url = f"ipc://{ipc_dir}/{wire}-{layout}"
            server = subprocess.Popen([exe, "-u", str(shard), "-b", "4", "-w", "2", "--epochs", "1", "-r", "0",
                                       "--size", "48", "--seed", "3", "--shuffle", "0", "--layout", layout,
                                       "--wire", wire, "zpush+" + url], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            c = tensorcom.Connection("zpull+" + url, timeout=30)
            try:
                received[wire] = np.concatenate([c.recv()[0] for _ in range(3)])
            finally:
                c.close()
                server.wait(timeout=30)
        assert received["raw"].shape == ((12, 48, 48, 3) if layout == "BHWC" else (12, 3, 48, 48))
        assert np.array_equal(received["raw"], received["zstd"]), layout
