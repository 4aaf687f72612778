"""tensorcom with PyTorch: the "torch" and "torch_cuda" converters,
TensorcomDataset, and examples/pytorch/train.py for a few steps (against
serve-ten too). Skipped without torch (torchvision for the example; CUDA for
torch_cuda). Environment as test_bindings.py.
"""

import os
import re
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
import pytest

import tensorcom
from tensorcom import tenbin

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "examples", "pytorch", "train.py")
BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
SERVE_TEN = os.path.join(BUILD_DIR, "servers", "serve-ten")
TENBIN = os.path.join(BUILD_DIR, "tools", "tenbin")
TIMEOUT_S = 10


def batch(i=0):
    rng = np.random.default_rng(i)
    return [rng.integers(0, 256, (4, 6, 5, 3), dtype=np.uint8), np.arange(4, dtype=np.int32) + i,
            np.full((4, 2), 0.5, np.float16)]


def test_torch_converter_is_zero_copy_bchw(ipc_dir):
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/t", timeout=TIMEOUT_S) as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/t") as push:
        push.send(batch())
        arrays = pull.recv()
    convert = tensorcom.converter_table["torch"]
    images, labels, floats = [convert(a) for a in arrays]
    assert images.shape == (4, 3, 6, 5) and images.dtype == torch.uint8
    assert images.data_ptr() == arrays[0].ctypes.data  # a view of the message
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(images, torch.from_numpy(batch()[0].copy()).permute(0, 3, 1, 2))
    assert labels.dtype == torch.int64 and labels.tolist() == [0, 1, 2, 3]
    assert floats.dtype == torch.float32 and floats.shape == (4, 2)


def test_connection_converters(ipc_dir):
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/c", timeout=TIMEOUT_S, converters="torch") as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/c") as push:
        push.send(batch())
        push.send([torch.arange(3, dtype=torch.int16)])  # CPU torch tensors can be sent
        images, labels, _ = pull.recv()
        assert isinstance(images, torch.Tensor) and images.shape == (4, 3, 6, 5)
        (small,) = pull.recv()
        assert small.tolist() == [0, 1, 2] and small.dtype == torch.int64


def test_device_cpu_gives_torch_tensors(ipc_dir):
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/dev", timeout=TIMEOUT_S, device="cpu") as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/dev") as push:
        push.send(batch())
        images, labels, _ = pull.recv()
        assert isinstance(images, torch.Tensor) and images.shape == (4, 3, 6, 5)
        assert isinstance(labels, torch.Tensor)


def test_dataset_yields_the_references_items(ipc_dir):
    # The reference's signature; its items are what Connection.recv() returns.
    dataset = tensorcom.TensorcomDataset(f"zpull+ipc://{ipc_dir}/d", length=3)
    assert len(dataset) == 3
    dataset.connection()  # bind before sending
    with tensorcom.Connection(f"zpush+ipc://{ipc_dir}/d") as push:
        for i in range(3):
            push.send(batch(i))
        got = list(dataset)
    assert all(isinstance(b, list) and isinstance(b[0], np.ndarray) for b in got)
    assert [b[1].tolist() for b in got] == [[i, i + 1, i + 2, i + 3] for i in range(3)]
    dataset.close()
    assert isinstance(tensorcom.TensorcomDataset, type)
    from tensorcom.zcom import TensorcomDataset
    assert TensorcomDataset is tensorcom.TensorcomDataset


def test_dataset_with_dataloader(ipc_dir):
    dataset = tensorcom.TensorcomDataset(f"zpull+ipc://{ipc_dir}/d", length=3, converters="torch",
                                         timeout=TIMEOUT_S)
    dataset.connection()
    with tensorcom.Connection(f"zpush+ipc://{ipc_dir}/d") as push:
        for i in range(3):
            push.send(batch(i))
        loader = torch.utils.data.DataLoader(dataset, batch_size=None)
        got = list(loader)
    dataset.close()
    assert len(loader) == 3 and len(got) == 3
    assert [b[1].tolist() for b in got] == [[i, i + 1, i + 2, i + 3] for i in range(3)]


@contextmanager
def serve_ten(tmp_path, url):
    """serve-ten sending a small .ten file's batches forever on url; yields the bound port."""
    for exe in (SERVE_TEN, TENBIN):
        if not os.access(exe, os.X_OK):
            pytest.fail(f"{exe} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")
    path = tmp_path / "synth.ten"
    subprocess.run([TENBIN, "synth", "-b", "4", "-s", "8", "-n", "2", "-o", str(path)], check=True, timeout=30)
    proc = subprocess.Popen([SERVE_TEN, "-i", str(path), "--epochs", "0", url], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        m = re.search(r"\[bound tcp://127\.0\.0\.1:(\d+)\]", proc.stdout.readline())
        assert m
        yield m.group(1)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()


def test_dataset_workers_share_push_pull(tmp_path):
    with serve_ten(tmp_path, "zrpush://127.0.0.1:0") as port:
        dataset = tensorcom.TensorcomDataset(f"zrpull://127.0.0.1:{port}", length=8, timeout=TIMEOUT_S)
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
        assert len(loader) == 8
        for _ in range(2):  # two epochs, fresh workers each
            got = list(loader)
            assert len(got) == 8 and all(b[0].shape[0] == 4 for b in got)


def test_dataset_workers_over_pub_sub_warn_and_do_not_repeat(tmp_path):
    # In a program of its own: under pytest a worker's warning is recorded, not printed.
    script = """
import sys, torch, tensorcom
dataset = tensorcom.TensorcomDataset(sys.argv[1], length=8, timeout=%d)
loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
for epoch in range(2):
    print(len(list(loader)), len(loader))
""" % TIMEOUT_S
    with serve_ten(tmp_path, "zpub://127.0.0.1:0") as port:
        r = subprocess.run([sys.executable, "-c", script, f"zsub://127.0.0.1:{port}"], capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "8 8\n8 8\n"  # each batch once, not once per worker
    # Once per worker-0 process: the DataLoader starts fresh workers each epoch.
    assert r.stderr.count("cannot be split over 2 DataLoader workers") == 2, r.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.cuda is not available")
def test_torch_cuda_converter(ipc_dir):
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/g", timeout=TIMEOUT_S, converters="torch_cuda") as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/g") as push:
        sent = batch()
        push.send(sent)
        images, labels, floats = pull.recv()
    assert images.is_cuda and images.shape == (4, 3, 6, 5)
    assert torch.equal(images.cpu(), torch.from_numpy(sent[0]).permute(0, 3, 1, 2))
    assert labels.dtype == torch.int64 and labels.cpu().tolist() == [0, 1, 2, 3]
    assert floats.dtype == torch.float32 and floats.is_cuda


def test_torch_cuda_without_cuda_says_so():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available")
    convert = tensorcom.converter_table["torch_cuda"]
    with pytest.raises(tensorcom.UnavailableError, match="CUDA"):
        convert(np.zeros(3, np.float32))


# --- examples/pytorch/train.py -------------------------------------------------------------

def run_train(*args):
    pytest.importorskip("torchvision")
    cmd = [sys.executable, TRAIN, "--arch", "resnet18", "--steps", "2", "--warmup", "1", "--batch-size", "4",
           "--image-size", "32", "--device", "cpu", "--report", "1", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_train_synthetic():
    out = run_train("--data", "synthetic")
    assert re.search(r"train: synthetic: 8 images in [\d.]+ s, [\d.]+ images/s", out), out


def test_train_tensorcom_and_synthetic_in_one_run(tmp_path):
    for exe in (SERVE_TEN, TENBIN):
        if not os.access(exe, os.X_OK):
            pytest.fail(f"{exe} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")
    path = tmp_path / "synth.ten"
    subprocess.run([TENBIN, "synth", "-b", "4", "-s", "32", "-n", "2", "-o", str(path)], check=True, timeout=30)
    assert len(tenbin.load_lists(str(path))) == 2
    proc = subprocess.Popen([SERVE_TEN, "-i", str(path), "--epochs", "0", "zrpush://127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        m = re.search(r"\[bound tcp://127\.0\.0\.1:(\d+)\]", proc.stdout.readline())
        assert m
        out = run_train("--data", f"tensorcom:zrpull://127.0.0.1:{m.group(1)}", "--data", "synthetic",
                        "--timeout", "20", "--no-amp")
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()
    assert re.search(r"train: tensorcom:zrpull://\S+: 8 images in [\d.]+ s", out), out
    assert re.search(r"^synthetic\s+[\d.]+$", out, re.M), out


def test_train_folder_with_workers(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(5)
    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        for i in range(4):
            pixels = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / label / f"{i}.png")
    out = run_train("--data", f"folder:{tmp_path}", "--workers", "1")
    assert re.search(r"train: folder:\S+: 8 images in [\d.]+ s", out), out
