"""tensorcom with PyTorch: the "torch" and "torch_cuda" converters,
TensorcomDataset, and examples/pytorch/train.py for a few steps (against
serve-ten too). Skipped without torch (torchvision for the example; CUDA for
torch_cuda). Environment as test_bindings.py.
"""

import importlib.util
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
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


def need_tools():
    for exe in (SERVE_TEN, TENBIN):
        if not os.access(exe, os.X_OK):
            pytest.fail(f"{exe} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")


def synth_ten(tmp_path, name="synth", batch=4, size=8, count=2, classes=1000):
    """A .ten file of `count` random batches (tenbin synth); returns its path."""
    need_tools()
    path = tmp_path / f"{name}.ten"
    subprocess.run([TENBIN, "synth", "-b", str(batch), "-s", str(size), "-n", str(count), "--classes", str(classes),
                    "-o", str(path)], check=True, timeout=30)
    return path


@contextmanager
def serve_ten(tmp_path, url, path=None, extra=()):
    """serve-ten sending a .ten file's batches (default: a small synth_ten's) in
    order, forever, on url; yields the bound port."""
    path = path or synth_ten(tmp_path)
    proc = subprocess.Popen([SERVE_TEN, "-i", str(path), "--epochs", "0", *extra, url], stdout=subprocess.PIPE,
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


# --- torch_cuda through the C++ GPU feeder (tensorcom._GpuFeeder, DLPack) ------------------

from tensorcom import _tensorcom  # noqa: E402

FEEDING = torch.cuda.is_available() and _tensorcom.gpu_feeding_available()
needs_feeder = pytest.mark.skipif(not FEEDING, reason="needs torch.cuda and a build of tensorcom with CUDA")


def host_tensor(a):
    """a's memory as a DeviceTensor on the CPU: the DLPack export without a GPU."""
    return _tensorcom._host_tensor_for_tests(a)


def test_device_tensor_dlpack_export_shares_memory_and_releases_it():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    refs = sys.getrefcount(a)
    d = host_tensor(a)
    assert (d.shape, d.dtype, d.ndim, d.nbytes, d.host, d.converted) == ((2, 3, 4), "int32", 3, 96, None, False)
    assert d.__dlpack_device__() == (1, 0)  # kDLCPU; a feeder's tensors say (2, ordinal): kDLCUDA
    t = torch.from_dlpack(d)
    assert t.data_ptr() == a.ctypes.data == d.data_ptr and torch.equal(t, torch.from_numpy(a))
    capsule = d.__dlpack__(stream=None, max_version=(1, 0))  # a legacy capsule serves any max_version
    assert 'capsule object "dltensor"' in repr(capsule)
    del capsule  # never consumed: its destructor calls the deleter
    with pytest.raises(BufferError):
        d.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        d.__dlpack__(dl_device=(2, 0))
    del d
    assert sys.getrefcount(a) > refs  # torch's tensor holds the memory through the deleter's owner
    del t
    # torch calls the deleter without the GIL: the array's reference is put
    # aside then, and dropped at the next call that makes a tensor.
    host_tensor(np.zeros(1))
    assert sys.getrefcount(a) == refs


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
                                   "uint16", "uint32"])
def test_cuda_converter_on_feeder_tensors_gives_the_host_paths_tensors(dtype):
    # The feeder path of the torch_cuda converter, on host DeviceTensors: the
    # dtypes, shapes, layouts and values of the "torch" converter's tensors.
    rng = np.random.default_rng(3)
    high = 100 if dtype.startswith("int") else 256
    shapes = [(4, 6, 5, 3), (2, 3), (5,), ()]
    for shape in shapes:
        a = rng.integers(0, high, shape).astype(dtype)
        if dtype.startswith("uint") and dtype != "uint8":
            a[...] = np.iinfo(dtype).max - a  # values past the signed range
        expected = tensorcom.converter_table["torch"](a)
        got = tensorcom.totorch(device="cuda")(host_tensor(a))
        assert (got.dtype, got.shape, got.stride()) == (expected.dtype, expected.shape, expected.stride())
        assert torch.equal(got, expected)
    images = rng.integers(0, 256, (2, 4, 4, 3), dtype=np.uint8)
    flat = tensorcom.totorch(device="cuda", transpose=False, dtype="float32")(host_tensor(images))
    assert flat.shape == (2, 4, 4, 3) and flat.dtype == torch.float32


@pytest.mark.skipif(FEEDING, reason="this build feeds GPUs")
def test_gpu_feeder_without_cuda_says_so(ipc_dir):
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/nf") as pull:
        with pytest.raises(tensorcom.UnavailableError, match="GPU feeding is not available"):
            _tensorcom._GpuFeeder(pull._core(), device=0)


def test_normalize_needs_the_feeder():
    with pytest.raises(tensorcom.ArgumentError, match="normalize"):
        tensorcom.totorch(device="cuda", normalize={"means": 1})
    with pytest.raises(tensorcom.ArgumentError, match="GPU feeder"):
        tensorcom.totorch(device="cpu", normalize=True)
    if torch.cuda.is_available():
        with pytest.raises(tensorcom.UnavailableError, match="feeder"):
            tensorcom.totorch(device="cuda", normalize=True)(np.zeros((1, 2, 2, 3), np.uint8))


@needs_feeder
@pytest.mark.parametrize("how", [dict(converters="torch_cuda"), dict(device="cuda")])
def test_torch_cuda_through_the_feeder_gives_the_host_paths_tensors(ipc_dir, how):
    n = 8
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/f", timeout=TIMEOUT_S, **how) as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/f") as push:
        for i in range(n):
            push.send(batch(i))
        pointers = set()
        for i in range(n):
            got = pull.recv()
            assert pull._feeder is not None  # the feeder received it, not the Python path
            expected = [tensorcom.converter_table["torch"](a).cuda() for a in batch(i)]
            for g, e in zip(got, expected):
                assert g.is_cuda and g.device.index == torch.cuda.current_device()
                assert (g.dtype, g.shape, g.stride()) == (e.dtype, e.shape, e.stride())
                assert torch.equal(g, e)
            pointers.add(got[0].data_ptr())
            del got
        assert pull.count == n
    # uint8 images are the feeder's memory itself: a pool of prefetch + 1
    # buffers, no tensor allocated (nor uploaded) by torch for each batch.
    assert len(pointers) <= 3


@needs_feeder
def test_feeder_reuses_a_buffer_only_after_the_consumers_stream_read_it(ipc_dir):
    # Batch i is all i. On a side stream each is read after a long GPU sleep,
    # and every reference to it is dropped at once, while the feeder (two
    # buffers) is already copying the next batches. Were a buffer refilled
    # without waiting for the side stream's work, the sums would see later
    # batches' values; were the read not ordered after the copy, stale ones.
    n, side = 8, torch.cuda.Stream()
    converter = tensorcom.totorch(device="cuda", prefetch=1)
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/s", timeout=TIMEOUT_S, converters=converter) as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/s") as push:
        for i in range(n):
            push.send([np.full((1024, 1024), i, np.float32)])
        sums, pointers = [], set()
        with torch.cuda.stream(side):
            for i in range(n):
                allocated = torch.cuda.memory_allocated()
                (t,) = pull.recv()
                # The feeder's buffer itself: torch allocated nothing for it.
                assert t.dtype == torch.float32 and torch.cuda.memory_allocated() == allocated
                pointers.add(t.data_ptr())
                torch.cuda._sleep(100_000_000)  # tens of milliseconds of GPU time before the read
                sums.append(t.sum())
                del t
        side.synchronize()
        assert pull._feeder is not None
    assert [s.item() for s in sums] == [float(i * 1024 * 1024) for i in range(n)]
    assert len(pointers) <= 2  # prefetch=1: a pool of two device buffers


@needs_feeder
def test_dlpack_from_the_feeder_under_a_non_default_stream(ipc_dir):
    device = torch.cuda.current_device()
    values = np.arange(12, dtype=np.int32).reshape(3, 4)
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/d", timeout=TIMEOUT_S) as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/d") as push:
        feeder = _tensorcom._GpuFeeder(pull._core(), device=device, prefetch=1)
        try:
            push.send([values], infos=["lab"])
            tensors, infos = feeder.recv(TIMEOUT_S)
        finally:
            feeder.close()  # its thread reads the connection: it stops first
    (d,) = tensors
    assert infos == ["lab"] and (d.shape, d.dtype, d.info, d.device) == ((3, 4), "int32", "lab", device)
    assert d.__dlpack_device__() == (2, device)
    cai = d.__cuda_array_interface__
    assert (cai["version"], cai["shape"], cai["typestr"], cai["data"]) == (3, (3, 4), "<i4", (d.data_ptr, False))
    assert cai["stream"] not in (None, 0)  # the feeder's copy stream, to synchronize with
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.from_dlpack(d)  # side waits for the copy, on the GPU
        doubled = t * 2
    side.synchronize()
    assert t.is_cuda and t.device.index == device and t.data_ptr() == d.data_ptr
    # Valid after the feeder is gone, as long as a reference lives.
    assert doubled.cpu().tolist() == (values * 2).tolist() and t.cpu().tolist() == values.tolist()
    capsule = d.__dlpack__(stream=side.cuda_stream, max_version=(1, 0))
    assert 'capsule object "dltensor"' in repr(capsule)


@needs_feeder
def test_feeder_times_out_as_the_connection_does(ipc_dir):
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/t", timeout=0.3, converters="torch_cuda") as pull:
        start = time.monotonic()
        with pytest.raises(tensorcom.TimeoutError, match="no batch within 300 ms"):
            pull.recv()
        assert 0.25 < time.monotonic() - start < 5
        assert pull.recv(timeout=0.1) is None


@needs_feeder
def test_feeder_keeps_the_resume_metadata_on_the_host(ipc_dir):
    msgpack = pytest.importorskip("msgpack")
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/m", timeout=TIMEOUT_S, converters="torch_cuda") as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/m") as push:
        for i in range(3):
            meta = msgpack.packb({"stream": "s", "fingerprint": "0123456789abcdef", "seed": 1, "epoch": 0,
                                  "batch": i, "batches": 10})
            push.send(batch(i)[:2] + [np.frombuffer(meta, np.uint8)], infos=["", "", "meta"])
        for i in range(3):
            images, labels, meta = pull.recv()
            assert meta.is_cuda and labels.cpu().tolist() == (np.arange(4) + i).tolist()
        token = pull.state_dict()
    assert token["streams"]["s"]["epochs"]["0"]["consumed"] == [[0, 3]]


@needs_feeder
def test_feeder_normalizes_images_on_the_gpu(ipc_dir):
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/n", timeout=TIMEOUT_S,
                              converters=tensorcom.totorch(device="cuda", normalize=True)) as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/n") as push:
        sent = batch(5)
        push.send(sent)
        images, labels, _ = pull.recv()
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    expected = (torch.from_numpy(sent[0]).permute(0, 3, 1, 2).float() / 255 - mean) / std
    assert images.dtype == torch.float32 and images.shape == (4, 3, 6, 5) and images.is_contiguous()
    assert torch.allclose(images.cpu(), expected, atol=1e-4)
    assert labels.dtype == torch.int64


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
    path = synth_ten(tmp_path, size=32)
    assert len(tenbin.load_lists(str(path))) == 2
    with serve_ten(tmp_path, "zrpush://127.0.0.1:0", path) as port:
        out = run_train("--data", f"tensorcom:zrpull://127.0.0.1:{port}", "--data", "synthetic",
                        "--timeout", "20", "--no-amp")
    assert re.search(r"train: zrpull://\S+: batches of 4$", out, re.M), out
    # The share of each interval's step time spent waiting, from the Connection's own measure.
    assert re.search(r"train: tensorcom:zrpull://\S+ step 1/2 loss [\d.]+ [\d.]+ images/s, "
                     r"waiting for data \d+%, 0:00:\d\d left$", out, re.M), out
    assert re.search(r"train: tensorcom:zrpull://\S+: 8 images in [\d.]+ s, [\d.]+ images/s, "
                     r"waiting for data \d+%$", out, re.M), out
    assert re.search(r"^synthetic\s+[\d.]+$", out, re.M), out


def test_train_over_curve(tmp_path):
    """train.py as a CURVE client of an allow-listing server; a trainer
    without the keys gets nothing and times out."""
    tenbin_exe = os.path.join(os.path.dirname(SERVE_TEN), "..", "tools", "tenbin")
    (tmp_path / "allowed").mkdir()
    for name in ("server", "allowed/trainer"):
        subprocess.run([tenbin_exe, "keygen", str(tmp_path / name)], check=True, capture_output=True, timeout=30)
    curve = ("--curve-secret", str(tmp_path / "server_secret"), "--curve-allow", str(tmp_path / "allowed"))
    with serve_ten(tmp_path, "zrpush://127.0.0.1:0", synth_ten(tmp_path, size=32), extra=curve) as port:
        url = f"tensorcom:zrpull://127.0.0.1:{port}"
        out = run_train("--data", url, "--timeout", "20", "--no-amp", "--curve-secret",
                        str(tmp_path / "allowed" / "trainer_secret"), "--curve-server", str(tmp_path / "server"))
        assert re.search(r"train: tensorcom:zrpull://\S+: 8 images in", out), out
        cmd = [sys.executable, TRAIN, "--arch", "resnet18", "--steps", "1", "--warmup", "0", "--image-size", "32",
               "--device", "cpu", "--data", url, "--timeout", "3"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode != 0 and "no batch" in r.stderr, r.stderr


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


def train_module():
    """examples/pytorch/train.py, imported, to drive its input paths directly."""
    pytest.importorskip("torchvision")
    if os.path.dirname(TRAIN) not in sys.path:
        sys.path.insert(0, os.path.dirname(TRAIN))  # its neighbour recipe_training.py, as running it gives
    spec = importlib.util.spec_from_file_location("train_example", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("batch_size", [3, 5, 6])
def test_train_rebatches_every_sample_once_in_order(tmp_path, batch_size):
    # The server sends 3 batches of 4 an epoch: 3 splits them, 5 and 6 join them,
    # 5 across the server's epochs too.
    path = synth_ten(tmp_path, count=3, classes=1 << 30)
    lists = tenbin.load_lists(str(path))
    sent_images = np.concatenate([images for images, _ in lists] * 3)
    sent_labels = np.concatenate([labels for _, labels in lists] * 3)
    train = train_module()
    args = train.parse_args(["--data", "synthetic", "--timeout", "20"])
    with serve_ten(tmp_path, "zrpush://127.0.0.1:0", path) as port:
        source = train.TensorcomBatches(f"zrpull://127.0.0.1:{port}", args, torch.device("cpu"), batch_size)
        try:
            got = [next(source) for _ in range(-(-26 // batch_size))]  # two server epochs and more
        finally:
            source.close()
    assert all(images.shape[0] == batch_size and labels.shape[0] == batch_size for images, labels in got)
    n = len(got) * batch_size
    assert torch.cat([labels for _, labels in got]).tolist() == sent_labels[:n].tolist()
    images = torch.cat([images for images, _ in got]).permute(0, 2, 3, 1)  # BCHW back to the sent BHWC
    assert np.array_equal(images.numpy(), sent_images[:n])


def sized_batch(i, size, n=4):
    """A uint8 BHWC batch of n size x size images, labels i*n.., as an image server sends."""
    rng = np.random.default_rng(i)
    return [rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8), np.arange(n, dtype=np.int32) + i * n]


def test_dataset_across_a_size_change(ipc_dir):
    # A server with --size-schedule: two batches at 16, then two at 32.
    dataset = tensorcom.TensorcomDataset(f"zpull+ipc://{ipc_dir}/d", length=4, converters="torch",
                                         timeout=TIMEOUT_S)
    dataset.connection()
    sizes = [16, 16, 32, 32]
    with tensorcom.Connection(f"zpush+ipc://{ipc_dir}/d") as push:
        for i, size in enumerate(sizes):
            push.send(sized_batch(i, size))
        got = list(torch.utils.data.DataLoader(dataset, batch_size=None))
    dataset.close()
    assert [tuple(images.shape) for images, _ in got] == [(4, 3, s, s) for s in sizes]
    assert torch.cat([labels for _, labels in got]).tolist() == list(range(16))
    # A channels-last model takes both sizes.
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    model = model.to(memory_format=torch.channels_last)
    for images, _ in got:
        assert model(images.float().contiguous(memory_format=torch.channels_last)).shape == (4, 4)


def test_train_rebatches_across_a_size_change(ipc_dir, capsys):
    """train.py re-batching 4-image batches to 3 never joins two sizes: the
    last of the old size goes out short; the model trains on both sizes."""
    train = train_module()
    args = train.parse_args(["--data", "synthetic", "--timeout", "20", "--arch", "resnet18", "--classes", "10",
                             "--device", "cpu", "--no-amp"])
    sizes = [16, 16, 32, 32, 48]  # the short batch of 32 goes out once a batch of 48 shows the change
    with tensorcom.Connection(f"zrpush+ipc://{ipc_dir}/s") as push:
        source = train.TensorcomBatches(f"zrpull+ipc://{ipc_dir}/s", args, torch.device("cpu"), 3)
        try:
            for i, size in enumerate(sizes):
                push.send(sized_batch(i, size))
            got = [next(source) for _ in range(6)]
        finally:
            source.close()
    assert [(images.shape[0], images.shape[2]) for images, _ in got] == [(3, 16), (3, 16), (2, 16),
                                                                         (3, 32), (3, 32), (2, 32)]
    assert torch.cat([labels for _, labels in got]).tolist() == list(range(16))
    assert "images of shape (3, 32, 32) (was (3, 16, 16))" in capsys.readouterr().out
    trainer = train.Trainer(args, torch.device("cpu"))
    for images, labels in got[1:4]:
        assert torch.isfinite(trainer.step(images, labels % 10))


def test_train_options_that_need_epochs_are_refused(capsys):
    train = train_module()
    for argv, message in [(["--val", "zsub://h:1", "--val-size", "1"], "--val, --val-size: only with --epochs"),
                          (["--epochs", "1", "--val", "zsub://h:1"], "--val needs --val-size"),
                          (["--epochs", "1", "--resume"], "--resume needs --checkpoint"),
                          (["--epochs", "1", "--data", "synthetic"], "--epochs trains on one --data"),
                          (["--batch-size", "0"], "--batch-size 0: must be at least 1")]:
        with pytest.raises(SystemExit) as exit:
            train.parse_args(["--data", "synthetic", *argv])
        assert exit.value.code == 2
        assert message in capsys.readouterr().err


def test_train_epochs_val_checkpoint_and_resume(tmp_path):
    train_ten = synth_ten(tmp_path, "train", size=16, count=3, classes=10)  # 12 images an epoch
    val_ten = synth_ten(tmp_path, "val", size=16, count=2, classes=10)
    checkpoint = tmp_path / "model.pt"
    with serve_ten(tmp_path, "zrpush://127.0.0.1:0", train_ten) as train_port, \
            serve_ten(tmp_path, "zrpush://127.0.0.1:0", val_ten) as val_port:
        options = ["--data", f"tensorcom:zrpull://127.0.0.1:{train_port}", "--batch-size", "6", "--epoch-size", "2",
                   "--val", f"tensorcom:zrpull://127.0.0.1:{val_port}", "--val-size", "2", "--classes", "10",
                   "--checkpoint", str(checkpoint), "--timeout", "20", "--no-amp"]
        out = run_train("--epochs", "2", *options)
        assert re.search(r"train: zrpull://\S+: batches of 4, re-batched to 6$", out, re.M), out
        for epoch in (1, 2):
            assert re.search(rf"train: epoch {epoch}/2 step 1/2 loss [\d.]+ [\d.]+ images/s, "
                             r"waiting for data \d+%", out), out
            assert re.search(rf"train: epoch {epoch}/2: loss [\d.]+, lr [\d.e-]+, 12 images in [\d.]+ s", out), out
            assert re.search(rf"train: epoch {epoch}/2 val: loss [\d.]+, accuracy [\d.]+% \(8 images", out), out
            assert f"train: saved epoch {epoch} to {checkpoint}" in out
        assert torch.load(str(checkpoint))["epoch"] == 2

        out = run_train("--epochs", "3", "--resume", *options)
        assert f"train: resumed from {checkpoint} after epoch 2" in out
        assert "epoch 1/3" not in out and "epoch 2/3" not in out, out
        assert re.search(r"train: epoch 3/3 val: loss [\d.]+, accuracy [\d.]+%", out), out
    assert torch.load(str(checkpoint))["epoch"] == 3
    assert sorted(os.listdir(tmp_path)) == ["model.pt", "train.ten", "val.ten"]  # no temporary file left


def run_train_failing(*args):
    """Runs train.py expecting failure; returns its stderr."""
    pytest.importorskip("torchvision")
    r = subprocess.run([sys.executable, TRAIN, "--device", "cpu", *args], capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    return r.stderr


def test_train_errors_are_one_line():
    err = run_train_failing("--data", "tensorcom:zrpull://127.0.0.1:notaport")
    assert re.fullmatch(r"train: error: UrlError: .*'zrpull://127\.0\.0\.1:notaport'.*\n", err), err
    err = run_train_failing("--data", "tensorcom:zrpull+ipc:///nonexistent-dir/none", "--timeout", "0.5")
    assert re.fullmatch(r"train: error: TimeoutError: no batch from \S+ in 0\.5 s\n", err), err


def test_train_progress_bar_on_a_terminal():
    pytest.importorskip("tqdm")
    pytest.importorskip("torchvision")
    master, terminal = pty.openpty()
    cmd = [sys.executable, TRAIN, "--arch", "resnet18", "--steps", "3", "--warmup", "0", "--batch-size", "2",
           "--image-size", "16", "--device", "cpu", "--report", "1", "--no-amp", "--data", "synthetic"]
    proc = subprocess.Popen(cmd, stdout=terminal, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(terminal)
    out = b""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1)[0]:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        os.close(master)
        proc.kill()
        proc.wait()
        proc.stderr.close()
    text = out.decode(errors="replace")
    # tqdm's bar: images done of the total, the time so far < the time left, the rate.
    assert re.search(r"train: synthetic: +100%.* 6/6 \[[\d:]+<[\d:]+, +[\d.]+img/s, loss [\d.]+, waiting for data",
                     text), text
    assert "step 1/3" not in text  # no plain lines on a terminal


# --- train.py: checkpoints with the data token, signals, resuming mid-epoch ---------------

SHARDS_EXE = os.path.join(BUILD_DIR, "servers", "serve-imagenet-shards")
RESUME_BATCH = 4        # the server's batches
RESUME_EPOCH = 8        # --epoch-batches: train.py's epoch is as many steps
SIGNALLED_AFTER = 4     # steps done when the signal comes (one more if it waits for a batch meanwhile)


def tiny_shards(directory, shards=2, samples=16):
    """Shards of small JPEGs (label = shard index); returns a brace pattern naming them."""
    Image = pytest.importorskip("PIL.Image")
    import io
    import tarfile
    rng = np.random.default_rng(11)
    paths = []
    for s in range(shards):
        path = os.path.join(directory, f"shard-{s}.tar")
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for i in range(samples):
                jpeg = io.BytesIO()
                Image.fromarray(rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)).save(jpeg, "JPEG")
                for ext, data in (("jpg", jpeg.getvalue()), ("cls", str(s).encode())):
                    info = tarfile.TarInfo(f"s{s}_{i:03d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        paths.append(path)
    return "{" + ",".join(paths) + "}"


@contextmanager
def shard_server(shards, url, tmp_path, name, extra=()):
    """serve-imagenet-shards with --meta and an epoch of RESUME_EPOCH batches,
    one epoch, on url; yields the process (killed at the end)."""
    if not os.access(SHARDS_EXE, os.X_OK):
        pytest.skip(f"{SHARDS_EXE} is not built")
    log = open(tmp_path / f"{name}.log", "wb")
    proc = subprocess.Popen([SHARDS_EXE, "-u", shards, "--meta", "-b", str(RESUME_BATCH), "--size", "32",
                             "--epoch-batches", str(RESUME_EPOCH), "--epochs", "1", "--seed", "5", "-w", "1",
                             "-r", "0", "--classes", "10", *extra, url],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def train_args(checkpoint, url, *extra):
    return [sys.executable, TRAIN, "--arch", "resnet18", "--device", "cpu", "--no-amp", "--classes", "10",
            "--report", "1", "--epochs", "1", "--epoch-size", str(RESUME_EPOCH), "--checkpoint", str(checkpoint),
            "--timeout", "30", "--data", f"tensorcom:{url}", *extra]


def read_lines_until(proc, pattern, deadline):
    """Lines of proc's stdout up to one matching pattern; fails past the deadline."""
    lines = []
    while time.monotonic() < deadline:
        if not select.select([proc.stdout], [], [], 0.5)[0]:
            continue
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if re.search(pattern, line):
            return lines
    raise AssertionError(f"no line matching {pattern!r}:\n{''.join(lines)}")


def consumed_batches(token, epoch=0):
    """{stream: set of batch indices of `epoch` the token counts consumed}."""
    out = {}
    for name, stream in token["streams"].items():
        if epoch < stream["complete"]:
            out[name] = set(range(RESUME_EPOCH))
        else:
            ranges = stream["epochs"].get(str(epoch), {"consumed": []})["consumed"]
            out[name] = {i for a, b in ranges for i in range(a, b)}
    return out


def signalled_part(tmp_path, ipc_dir, shards, checkpoint):
    """train.py fed SIGNALLED_AFTER batches through a relay, then SIGUSR1 once
    it said it did that many steps (it stops there, or waits for its next
    batch and stops after that one), then one more batch. Returns (steps
    done, its stdout)."""
    zmq = pytest.importorskip("zmq")
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    for sock in (pull, push):
        sock.setsockopt(zmq.LINGER, 0)
    pull.bind(f"ipc://{ipc_dir}/in")
    push.bind(f"ipc://{ipc_dir}/out")
    proc = None
    try:
        with shard_server(shards, f"zpush+ipc://{ipc_dir}/in", tmp_path, "server-1"):
            proc = subprocess.Popen(train_args(checkpoint, f"zrpull+ipc://{ipc_dir}/out"), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
            deadline = time.monotonic() + 120

            def relay(count):
                for _ in range(count):
                    assert pull.poll(30000), "no batch from the server"
                    push.send_multipart(pull.recv_multipart())

            def relay_while_it_runs():
                # It may stop and leave without this batch; while it runs it
                # gets it, even through a reconnection (a loaded machine can
                # miss a heartbeat): a send that gives up at once lost it.
                assert pull.poll(30000), "no batch from the server"
                frames = pull.recv_multipart()
                push.setsockopt(zmq.SNDTIMEO, 200)
                while proc.poll() is None and time.monotonic() < deadline:
                    try:
                        push.send_multipart(frames)
                        return
                    except zmq.Again:
                        continue

            push.setsockopt(zmq.SNDTIMEO, 60000)  # until the trainer connects
            relay(SIGNALLED_AFTER)
            out = read_lines_until(proc, rf"epoch 1/1 step {SIGNALLED_AFTER}/{RESUME_EPOCH} ", deadline)
            proc.send_signal(signal.SIGUSR1)
            relay_while_it_runs()
            rest, err = proc.communicate(timeout=max(1, deadline - time.monotonic()))
            assert proc.returncode == 128 + signal.SIGUSR1, err
            out = "".join(out) + rest
            m = re.search(r"^train: SIGUSR1: stopped after epoch 0 and (\d+) steps of epoch 1 \(checkpoint saved\); "
                          r"exit status 138$", out, re.M)
            assert m and int(m.group(1)) in (SIGNALLED_AFTER, SIGNALLED_AFTER + 1), out
            return int(m.group(1)), out
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        ctx.destroy(linger=0)


def test_train_signal_mid_epoch_then_resume_trains_exactly_the_rest(tmp_path, ipc_dir):
    """SIGUSR1 mid-epoch: train.py finishes its step, writes the checkpoint
    (epoch 0, step 4 or 5, the token) and the token file, and exits 138.
    Resumed against serve-imagenet-shards --resume TOKENFILE, it trains the
    epoch's other batches: the two parts' batches are the epoch's, each once."""
    pytest.importorskip("torchvision")
    shards = tiny_shards(str(tmp_path))
    checkpoint = tmp_path / "model.pt"
    token_file = tmp_path / "model.pt.data.json"
    done, out = signalled_part(tmp_path, ipc_dir, shards, checkpoint)
    assert f"train: saved epoch 0 and {done} steps of epoch 1 to {checkpoint} and {token_file}" in out, out
    state = torch.load(str(checkpoint))
    assert (state["epoch"], state["step"]) == (0, done)
    with open(token_file) as f:
        first = json.load(f)
    assert state["data"] == first
    assert consumed_batches(first) == {"0/1": set(range(done))}  # one server, in order, no re-batching
    assert sorted(os.listdir(tmp_path)) == ["model.pt", "model.pt.data.json", "server-1.log", "shard-0.tar",
                                            "shard-1.tar"]  # no temporary file left

    url = f"ipc://{ipc_dir}/resumed"
    with shard_server(shards, "zrpush+" + url, tmp_path, "server-2", ["--resume", str(token_file)]):
        r = subprocess.run(train_args(checkpoint, "zrpull+" + url, "--resume"), capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr + (tmp_path / "server-2.log").read_text()
    assert f"train: resumed from {checkpoint} after epoch 0 and {done} steps of epoch 1" in r.stdout, r.stdout
    assert f"train: data token loaded from {token_file}" in r.stdout, r.stdout
    rest = RESUME_EPOCH - done
    assert re.search(rf"train: epoch 1/1: loss [\d.]+, lr [\d.e-]+, {rest * RESUME_BATCH} images in [\d.]+ s, .*"
                     rf"\(steps {done + 1} to {RESUME_EPOCH} of {RESUME_EPOCH}\)$", r.stdout, re.M), r.stdout
    with open(token_file) as f:
        final = json.load(f)
    state = torch.load(str(checkpoint))
    assert (state["epoch"], state["step"], state["data"]) == (1, 0, final)
    # The Connection refuses a batch its loaded token lists (served twice), so
    # the second part's batches are new; with the first part's they make the epoch.
    assert final["streams"]["0/1"]["complete"] == 1 and final["streams"]["0/1"]["epochs"] == {}
    assert len(consumed_batches(first)["0/1"]) + rest == RESUME_EPOCH


def meta_batch(index, n=4, stream="s"):
    """A batch as a --meta server sends it: images, labels, the msgpack map."""
    msgpack = pytest.importorskip("msgpack")
    meta = msgpack.packb({"stream": stream, "fingerprint": "0123456789abcdef", "seed": 1, "epoch": 0,
                          "batch": index, "batches": 100})
    images, labels = sized_batch(index, 8, n)
    return [images, labels, np.frombuffer(meta, np.uint8)], ["", "", "meta"]


def test_train_token_counts_only_batches_wholly_trained_when_rebatching(ipc_dir):
    """Server batches of 4 re-batched to 3: after each step the token lists
    the batches whose every sample went into a step done, never one partly used."""
    train = train_module()
    args = train.parse_args(["--data", "synthetic", "--timeout", "20"])
    with tensorcom.Connection(f"zrpush+ipc://{ipc_dir}/r") as push:
        source = train.TensorcomBatches(f"zrpull+ipc://{ipc_dir}/r", args, torch.device("cpu"), 3)
        try:
            for i in range(5):
                push.send(*meta_batch(i))
            counts = []
            for _ in range(6):  # steps of samples 0-2, 3-5, 6-8, 9-11, 12-14, 15-17
                next(source)
                counts.append(len(consumed_batches(source.data_state()).get("s", ())))
        finally:
            source.close()
    # Step 2 used the rest of batch 0 and part of batch 1; step 4 ended batch 2 with
    # nothing left over; step 5 left part of batch 3 for step 6.
    assert counts == [0, 1, 2, 3, 3, 4]


def test_train_without_meta_writes_no_token(tmp_path):
    """serve-ten sends no --meta: the checkpoint's token is None and no token file is written."""
    path = synth_ten(tmp_path, size=16, count=2, classes=10)
    checkpoint = tmp_path / "model.pt"
    with serve_ten(tmp_path, "zrpush://127.0.0.1:0", path) as port:
        out = run_train("--epochs", "1", "--epoch-size", "1", "--data", f"tensorcom:zrpull://127.0.0.1:{port}",
                        "--classes", "10", "--checkpoint", str(checkpoint), "--timeout", "20", "--no-amp")
    assert f"train: saved epoch 1 to {checkpoint}\n" in out, out
    assert torch.load(str(checkpoint))["data"] is None
    assert not os.path.exists(f"{checkpoint}.data.json")


def test_train_on_batches_the_servers_mixed_uses_their_soft_targets(tmp_path, ipc_dir):
    """serve-imagenet-shards with MixUp/CutMix: train.py builds each batch's
    soft targets from the draws sent with it, re-batched or not."""
    shards = tiny_shards(str(tmp_path))
    url = f"ipc://{ipc_dir}/mixed"
    mixing = ("--mixup-alpha", "0.2", "--cutmix-alpha", "1.0")
    with shard_server(shards, "zpush+" + url, tmp_path, "mixed", extra=mixing):
        out = run_train("--data", f"tensorcom:zpull+{url}", "--classes", "10", "--batch-size", "3",
                        "--label-smoothing", "0.1", "--timeout", "30", "--no-amp")
    assert re.search(r"batches of 4, re-batched to 3, mixed by the servers \(soft targets\)$", out, re.M), out
    assert re.search(r"step 1/2 loss [\d.]+ ", out) and re.search(r": 6 images in [\d.]+ s", out), out


def test_soft_targets_of_served_draws():
    imaging = pytest.importorskip("tensorcom.imaging")
    draws = np.array([[1, 1, 0.25, 0, 0, 0, 0], [2, 0, 0.5, 0, 0, 2, 2], [0, 2, 1, 0, 0, 0, 0]])
    targets = imaging.mix_targets(torch.tensor([3, 1, 2]), torch.from_numpy(draws), 4)
    assert np.allclose(targets, [[0, 0.75, 0, 0.25], [0, 0.5, 0, 0.5], [0, 0, 1, 0]])
    with pytest.raises(imaging.ArgumentError, match="shape \\(N, 7\\)"):
        imaging.mix_targets([1], np.zeros((1, 6)), 4)
    with pytest.raises(imaging.ArgumentError, match="kind other than 0, 1 or 2"):
        imaging.mix_targets([1], np.array([[5, 0, 1, 0, 0, 0, 0.0]]), 4)
    with pytest.raises(imaging.ArgumentError, match="no int32"):
        imaging.mix_targets([1], np.array([[1, 0.5, 1, 0, 0, 0, 0.0]]), 4)


def recipe_server(shards, url, tmp_path, flags):
    """serve-imagenet-shards with exactly these flags (and --meta if asked), one epoch, on url."""
    if not os.access(SHARDS_EXE, os.X_OK):
        pytest.skip(f"{SHARDS_EXE} is not built")
    log = open(tmp_path / "recipe-server.log", "wb")
    proc = subprocess.Popen([SHARDS_EXE, "-u", shards, "--epochs", "1", "--seed", "5", "-w", "1", "-r", "0",
                             "--classes", "10", *flags, url], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    log.close()
    return proc


@pytest.mark.parametrize("change, error", [
    ((), None),
    (("--mixup-alpha", "0.8"), "--mixup-alpha 0.2 here, --mixup-alpha 0.8 there"),
    (("--no-meta",), "the servers send no --meta"),
])
def test_train_recipe_says_its_source_and_refuses_other_servers(tmp_path, ipc_dir, change, error):
    recipes = pytest.importorskip("tensorcom.recipes")
    recipe = recipes.get("torchvision-resnet50-v2")
    flags = recipe.server_args("train") + ["--dataset-samples", "32", "--ra-round", "0", "--meta"]
    if change == ("--no-meta",):
        flags.remove("--meta")
    elif change:
        flags[flags.index(change[0]) + 1] = change[1]
    url = f"ipc://{ipc_dir}/recipe"
    proc = recipe_server(tiny_shards(str(tmp_path)), "zpush+" + url, tmp_path, flags)
    try:
        cmd = [sys.executable, TRAIN, "--arch", "resnet18", "--steps", "1", "--warmup", "1", "--batch-size", "4",
               "--device", "cpu", "--no-amp", "--classes", "10", "--recipe", recipe.name, "--timeout", "30",
               "--data", f"tensorcom:zpull+{url}"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    finally:
        proc.kill()
        proc.wait()
    assert f"train: recipe {recipe.name}: {recipe.source}\n" in r.stdout, r.stdout
    assert f"train:   its source: {recipe.command}\n" in r.stdout, r.stdout
    served = recipe.server_args("train")
    served[served.index("--batch") + 1] = "4"  # the run's --batch-size
    assert f"training servers: serve-imagenet-shards {' '.join(served)} --meta\n" in r.stdout, r.stdout
    settings = re.search(r"^train:   settings \(torchvision's flags\): (.*)$", r.stdout, re.M)
    assert settings and "--lr 0.5 " in settings[1] and settings[1].endswith("--batch-size 4 --epochs 600"), r.stdout
    if error is None:
        assert r.returncode == 0, r.stderr
        assert "mixed by the servers (soft targets)" in r.stdout, r.stdout
    else:
        assert r.returncode == 1 and error in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_recipes_map_to_flags_the_servers_take(tmp_path):
    """Every preset's flags pass the servers' checks: the empty folder is the
    first thing refused."""
    recipes = pytest.importorskip("tensorcom.recipes")
    assert set(recipes.RECIPES) == {"torchvision-resnet50-v2", "timm-rsb-a3", "ffcv-rn50"}
    dir_exe = os.path.join(BUILD_DIR, "servers", "serve-imagenet-dir")
    for recipe in recipes.RECIPES.values():
        for split in ("train", "val"):
            r = subprocess.run([dir_exe, "-d", str(tmp_path), "--epochs", "1", *recipe.server_args(split),
                                "zpush+ipc:///nowhere/x"], capture_output=True, text=True, timeout=30)
            refused = r.returncode != 0 and "serve-imagenet-dir: no images under" in r.stderr
            assert refused, (recipe.name, split, r.stderr)
    with pytest.raises(tensorcom.ArgumentError, match="unknown recipe 'rn50': expected one of"):
        recipes.get("rn50")
    with pytest.raises(tensorcom.ArgumentError, match="--cutmix-alpha 1 here, not given there"):
        recipes.get("timm-rsb-a3").check({"mixup-alpha": "0.1"})
