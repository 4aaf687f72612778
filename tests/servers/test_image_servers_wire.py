"""--wire jpeg: the servers send each image as a standard JPEG (decoded
here by Pillow, not by tensorcom) of the pixels the raw wire sends for the
same seed, in the documented three tensors a receiver that does not know
them takes as plain tensors; what cannot be compressed is refused.

Run: TENSORCOM_BUILD_DIR=build pytest-3 -q -p no:cacheprovider tests/servers/
"""
import io
import os
import sys

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from image_server_data import run, shard_args  # noqa: E402


def common(paths, *extra):
    return shard_args(paths) + ["--epochs", "1", "-b", "8", "-w", "2", "--shuffle", "0", "--size", "64", "--seed",
                                "5", "-r", "0", *extra]


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def pillow_decoded(streams, offsets, shape, planar):
    """The images of a compressed batch as Pillow decodes its streams."""
    images = []
    for i in range(len(offsets) - 1):
        image = Image.open(io.BytesIO(streams[offsets[i]:offsets[i + 1]].tobytes()))
        assert image.format == "JPEG" and image.mode == "RGB"
        pixels = np.asarray(image)
        images.append(pixels.transpose(2, 0, 1) if planar else pixels)
    decoded = np.stack(images) if images else np.zeros(shape, np.uint8)
    assert decoded.shape == tuple(shape)
    return decoded


@pytest.mark.parametrize("layout", ["BHWC", "BCHW"])
def test_jpeg_wire_sends_standard_jpegs_of_the_raw_pixels(clean_data, rundir, layout):
    paths, _ = clean_data
    raw = run(common(paths, "--layout", layout), rundir)
    jpeg = run(common(paths, "--layout", layout, "--wire", "jpeg"), rundir)
    assert raw.rc == jpeg.rc == 0, jpeg.err
    assert len(raw.batches) == len(jpeg.batches) == 5
    planar = layout == "BCHW"
    raw_bytes = jpeg_bytes = 0
    for plain, batch, infos in zip(raw.batches, jpeg.batches, jpeg.infos):
        assert infos[:4] == ["jpegchw" if planar else "jpeg", "imgoff", "imgshape", ""], infos
        streams, offsets, shape, labels = batch
        assert streams.dtype == np.uint8 and offsets.dtype == np.int32 and shape.dtype == np.int32
        assert tuple(shape) == plain[0].shape and np.array_equal(labels, plain[1])
        assert offsets[0] == 0 and offsets[-1] == len(streams)
        decoded = pillow_decoded(streams, offsets, shape, planar)
        assert psnr(decoded, plain[0]) >= 40, psnr(decoded, plain[0])
        raw_bytes += plain[0].nbytes
        jpeg_bytes += streams.nbytes
    assert jpeg_bytes * 5 <= raw_bytes, (jpeg_bytes, raw_bytes)


def test_quality_and_chroma_set_the_size(clean_data, rundir):
    paths, _ = clean_data
    sizes = {}
    for wire in ("jpeg:95,444", "jpeg:95,420", "jpeg:70"):
        r = run(common(paths, "--wire", wire), rundir)
        assert r.rc == 0, r.err
        sizes[wire] = sum(b[0].nbytes for b in r.batches)
    assert sizes["jpeg:95,420"] < sizes["jpeg:95,444"] and sizes["jpeg:70"] < sizes["jpeg:95,444"], sizes


def test_mixed_batches_are_compressed_after_mixing(clean_data, rundir):
    """The streams hold the mixed images: the draws and metadata follow the labels."""
    paths, _ = clean_data
    mixing = ("--mixup-alpha", "0.4", "--cutmix-alpha", "1.0", "--meta")
    raw = run(common(paths, *mixing), rundir)
    jpeg = run(common(paths, *mixing, "--wire", "jpeg"), rundir)
    assert raw.rc == jpeg.rc == 0, jpeg.err
    for plain, batch, infos in zip(raw.batches, jpeg.batches, jpeg.infos):
        assert infos == ["jpeg", "imgoff", "imgshape", "", "mix", "meta"], infos
        assert np.array_equal(batch[4], plain[2])  # the same draws
        decoded = pillow_decoded(batch[0], batch[1], batch[2], False)
        assert psnr(decoded, plain[0]) >= 40


@pytest.mark.parametrize("extra, message", [
    (("--wire", "jpeg", "--dtype", "float16"), "--wire jpeg compresses uint8 images: not with --dtype float16"),
    (("--wire", "png"), "--wire png: expected raw, jpeg[:QUALITY][,444|420] or zstd[:LEVEL]"),
    (("--wire", "zstd:0"), "the zstd level must be 1 to 19, not '0'"),
    (("--wire", "jpeg:101"), "the JPEG quality must be 1 to 100, not '101'"),
    (("--wire", "jpeg:90,422"), "the chroma must be 444 or 420, not '422'"),
])
def test_what_cannot_be_compressed_is_refused(clean_data, rundir, extra, message):
    paths, _ = clean_data
    r = run(common(paths, *extra), rundir)
    assert r.rc != 0 and message in r.err and not r.batches, r.err
