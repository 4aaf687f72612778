"""The image servers' tests share these: a scratch root and the data sets
written into it, once per session (writing them takes seconds), and a fresh
folder per test for its sockets and output files.

Environment: TENSORCOM_BUILD_DIR, the meson build dir (servers/...).
"""
import os
import shutil
import sys
import tempfile

import cv2
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_helpers as h  # noqa: E402
from image_server_data import make_main_dataset, COLOURS  # noqa: E402

if not all(os.access(exe, os.X_OK) for exe in (h.SHARDS_EXE, h.DIR_EXE)):
    pytest.skip(f"servers not built (TENSORCOM_BUILD_DIR={h.BUILD_DIR!r})", allow_module_level=True)


@pytest.fixture(scope="session")
def root():
    d = tempfile.mkdtemp(dir="/tmp", prefix="tcs")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def rundir(root):
    """A fresh short dir for one test's sockets and output files."""
    return tempfile.mkdtemp(dir=root, prefix="r")


@pytest.fixture(scope="session")
def main_data(root):
    return make_main_dataset(root)


@pytest.fixture(scope="session")
def clean_data(root):
    """Two shards of 20 smooth JPEG/PNG images each: (paths, {key: label})."""
    rng = np.random.default_rng(77)
    d = os.path.join(root, "clean")
    os.makedirs(d)
    paths, labels = [], {}
    for s in range(2):
        samples = []
        for i in range(20):
            hh, ww = (int(v) for v in rng.integers(96, 161, 2))
            ext = "png" if i % 4 == 3 else "jpg"
            key = f"c{s}_{i:03d}"
            label = int(rng.integers(0, 5))
            labels[key] = label
            samples.append((key, {ext: h.encode(h.smooth_image(rng, hh, ww), ext), "cls": h.cls(label)}))
        path = os.path.join(d, f"clean-{s}.tar")
        h.write_tar(path, samples)
        paths.append(path)
    return paths, labels


@pytest.fixture(scope="session")
def colour_data(root):
    d = os.path.join(root, "colour")
    os.makedirs(d)
    samples, colours = [], {}
    for i, rgb in enumerate(COLOURS):
        img = np.zeros((80, 100, 3), np.uint8)
        img[:] = rgb
        for ext in ("jpg", "png"):
            key = f"col{i}_{ext}"
            colours[key] = rgb
            samples.append((key, {ext: h.encode(img, ext, quality=95), "cls": h.cls(i)}))
    for i, rgb in enumerate(COLOURS[:4]):
        img = np.zeros((60, 70, 3), np.uint16)
        img[:] = [c * 257 for c in rgb]
        key = f"col{i}_png16"
        colours[key] = rgb
        samples.append((key, {"png": h.encode(img, "png"), "cls": h.cls(i)}))
    grey = np.full((60, 70), 128, np.uint8)
    for ext in ("jpg", "png"):
        colours[f"grey_{ext}"] = (128, 128, 128)
        samples.append((f"grey_{ext}", {ext: h.encode(grey, ext, quality=95), "cls": h.cls(0)}))
    path = h.write_tar(os.path.join(d, "colours.tar"), samples)
    halves = []
    for ext in ("jpg", "png"):
        img = np.zeros((96, 128, 3), np.uint8)
        img[:, 64:] = 255
        halves.append((f"half_{ext}", {ext: h.encode(img, ext, quality=95), "cls": h.cls(0)}))
    half_path = h.write_tar(os.path.join(d, "halves.tar"), halves)
    return path, colours, half_path


@pytest.fixture(scope="session")
def folder(root):
    rng = np.random.default_rng(5)
    d = os.path.join(root, "folder")
    files = {}
    for split in ("train", "val"):
        for cls_name in ("cat", "dog", "ant"):
            os.makedirs(os.path.join(d, split, cls_name))
            n = 4 if split == "train" else 2
            for i in range(n):
                ext = "png" if i == 1 else "jpg"
                p = os.path.join(d, split, cls_name, f"{cls_name}{i}.{ext}")
                with open(p, "wb") as f:
                    f.write(h.encode(h.smooth_image(rng, 80, 96), ext))
                files.setdefault(split, {})[p] = {"ant": 0, "cat": 1, "dog": 2}[cls_name]
            with open(os.path.join(d, split, cls_name, "README.txt"), "w") as f:
                f.write("not an image\n")
    return d, files
