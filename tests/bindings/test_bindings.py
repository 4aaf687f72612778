"""The Python package tensorcom (bindings/) from the build tree.

Environment (set by meson test):
  PYTHONPATH            <build>/bindings, where the build lays out the package
  TENSORCOM_BUILD_DIR   the meson build dir (servers/serve-ten)
  TENSORCOM_GOLDEN_DIR  golden.json and the golden .ten files (tests skip without)

No fixed ports: ipc sockets live in a private temp dir, tcp binds port 0 and
reads back the port. Every subprocess is killed in a finally; every receive
has a timeout.
"""

import ast
import errno
import gc
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

import tensorcom
from tensorcom import tenbin

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import tenbin_ref as ref  # noqa: E402

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
GOLDEN_DIR = os.environ.get("TENSORCOM_GOLDEN_DIR", "")
SERVE_TEN = os.path.join(BUILD_DIR, "servers", "serve-ten")

TIMEOUT_S = 10  # one receive
DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def sample_arrays(rng):
    """One array of every dtype, plus a 0-d, an empty and an image-like one."""
    arrays = [ref.golden_values(d, (2, 3)) for d in DTYPES]
    arrays += [np.array(7, np.int32), np.zeros((0, 5), np.float32),
               rng.integers(0, 256, (4, 8, 8, 3), dtype=np.uint8)]
    return arrays


def same(a, b):
    return ref.same_list(list(a), list(b))


@contextmanager
def pair(ipc_dir, name="s", **options):
    """A PULL (bound) and a PUSH (connected) on one ipc socket."""
    url = f"ipc://{ipc_dir}/{name}"
    pull = tensorcom.Connection("zpull+" + url, timeout=TIMEOUT_S, **options)
    # These tests send every dtype; the refusal of 64-bit arrays has its own test.
    push = tensorcom.Connection("zpush+" + url, **{"allow64": True, **options})
    try:
        yield push, pull
    finally:
        push.close()
        pull.close()


# --- the package: its modules and what they import -------------------------------------

def package_imports():
    """{module: (modules it imports at module level, modules it imports inside
    functions, whether it imports torch at module level)} for the package's
    .py files as the build laid them out. Imports under a module-level `if
    TYPE_CHECKING:` count as module-level: they are what the module offers
    (the package's __init__ imports its names when first asked for)."""
    package = os.path.dirname(tensorcom.__file__)
    found = {}
    for name in sorted(os.listdir(package)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(package, name)) as f:
            tree = ast.parse(f.read())
        module_level = list(tree.body)
        for node in tree.body:
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                module_level += node.body
        top, inner = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
                (top if node in module_level else inner).update(names)
        uses_torch = any(isinstance(node, ast.Import) and any(a.name == "torch" for a in node.names)
                         for node in tree.body)
        found[name[:-3]] = (top, inner, uses_torch)
    return found


def test_modules_import_downwards():
    modules = package_imports()
    assert {"__init__", "connection", "converters", "dataset", "tenbin", "torch"} <= set(modules)
    # No import circle, not even one closed by an import inside a function:
    # peel off, again and again, the modules that import no module left.
    edges = {m: (top | inner) & set(modules) for m, (top, inner, _) in modules.items()}
    while edges:
        leaves = {m for m, imported in edges.items() if not imported - {m}}
        assert leaves, f"import circle among {sorted(edges)}: {edges}"
        edges = {m: imported - leaves for m, imported in edges.items() if m not in leaves}
    # An import inside a function is only for what needs torch, which is optional.
    for m, (_, inner, _) in modules.items():
        assert all(modules[i][2] for i in inner if i in modules), f"{m} imports {inner} lazily"


def test_torch_stays_optional():
    script = """
import sys
sys.modules["torch"] = None  # import torch raises ImportError
import tensorcom
assert not any(name in sys.modules for name in ("tensorcom.torch", "tensorcom.dataset")), sorted(sys.modules)
marker = object()
assert tensorcom.converter_table["numpy"](marker) is marker  # passes what is not a torch tensor
for ask in (lambda: tensorcom.converter_table["torch"], lambda: tensorcom.TensorcomDataset,
            lambda: tensorcom.zcom.TensorcomDataset, lambda: tensorcom.zcom.totorch()):
    try:
        ask()
    except ImportError:
        continue
    raise AssertionError("torch was not needed")
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


# --- tenbin: byte compatibility ---------------------------------------------------------

def golden_cases():
    path = os.path.join(GOLDEN_DIR, "golden.json")
    if not GOLDEN_DIR or not os.path.isfile(path):
        return []
    with open(path) as f:
        return json.load(f)["cases"]


needs_golden = pytest.mark.skipif(not golden_cases(), reason=f"no golden files (TENSORCOM_GOLDEN_DIR={GOLDEN_DIR!r})")


@needs_golden
@pytest.mark.parametrize("case", [pytest.param(c, id=c["file"]) for c in golden_cases()] or [None])
def test_golden_files(case, tmp_path):
    path = os.path.join(GOLDEN_DIR, case["file"])
    data = open(path, "rb").read()
    arrays = [ref.golden_values(t["dtype"], t["shape"]) for t in case["tensors"]]
    infos = [t["info"] for t in case["tensors"]]

    loaded, got = tenbin.load(path, infos=True)
    assert same(loaded, arrays) and got == infos
    decoded, got = tenbin.decode_buffer(data, infos=True)
    assert same(decoded, arrays) and got == infos
    with open(path, "rb") as f:
        assert same(tenbin.read(f), arrays)

    encoded = tenbin.encode_buffer(arrays, infos=infos)
    assert isinstance(encoded, bytearray) and bytes(encoded) == data
    stream = io.BytesIO()
    tenbin.write(stream, arrays, infos=infos)
    assert stream.getvalue() == data
    out = tmp_path / case["file"]
    tenbin.save(str(out), *arrays, infos=infos)
    assert out.read_bytes() == data

    frames = tenbin.encode_list(arrays, infos=infos)
    assert [len(bytes(f)) for f in frames] == case["multipart_frame_sizes"]
    assert [bytes(f) for f in frames] == ref.encode_frames(arrays, infos)
    assert same(tenbin.decode_list(ref.encode_frames(arrays, infos)), arrays)


def test_against_reference_peer():
    rng = np.random.default_rng(1)
    arrays = sample_arrays(rng)
    infos = [f"t{i}" for i in range(len(arrays))]
    assert bytes(tenbin.encode_buffer(arrays, infos)) == ref.encode_buffer(arrays, infos)
    assert [bytes(f) for f in tenbin.encode_list(arrays, infos)] == ref.encode_frames(arrays, infos)
    decoded, got = tenbin.decode_buffer(ref.encode_buffer(arrays, infos), infos=True)
    assert same(decoded, arrays) and got == infos
    assert [a.shape for a in decoded] == [a.shape for a in arrays]
    assert same(tenbin.decode_list(ref.encode_frames(arrays)), arrays)
    assert tenbin.decode_buffer(ref.encode_buffer(arrays), infos=[""] * len(arrays)) is not None
    with pytest.raises(tensorcom.FormatError):
        tenbin.decode_buffer(ref.encode_buffer(arrays), infos=["x"] * len(arrays))


def test_encoding_converts_what_is_not_wire_form():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    big = a.astype(">f4")
    strided = np.arange(48, dtype=np.float32).reshape(4, 12)[:, ::2]
    for x in (a.T, big, strided, a.tolist()):
        expected = np.ascontiguousarray(np.asarray(x), dtype=np.dtype(np.asarray(x).dtype.newbyteorder("=")))
        assert bytes(tenbin.encode_buffer([x])) == ref.encode_buffer([expected])
    assert tenbin.encode_header(a) == ref.encode_header(a)


def test_stream_of_several_lists(tmp_path):
    lists = [[np.full((2, 2), i, np.float32), np.array([i], np.int32)] for i in range(3)]
    path = tmp_path / "lists.ten"
    with open(path, "wb") as f:
        for arrays in lists:
            tenbin.write(f, arrays)
    loaded = tenbin.load_lists(str(path))
    assert len(loaded) == 3 and all(same(a, b) for a, b in zip(loaded, lists))
    assert len(tenbin.load(str(path))) == 6  # as the reference: every tensor, one list
    with open(path, "rb") as f:
        assert same(tenbin.read(f, n=2), lists[0])
        assert same(tenbin.read(f, n=2), lists[1])


# --- tenbin: errors --------------------------------------------------------------------

def test_malformed_input_raises_format_error():
    good = ref.encode_buffer([np.arange(10, dtype=np.int32)])
    cases = [good[:40], b"~TenBoo~" + good[8:], good[:16 + 64] + b"x" * 16]
    for bad in cases:
        with pytest.raises(tensorcom.FormatError) as info:
            tenbin.decode_buffer(bad)
        e = info.value
        assert isinstance(e, ValueError) and isinstance(e, tensorcom.Error)
        assert re.search(r"\(at byte \d+\)", str(e)) and isinstance(e.offset, int)
    with pytest.raises(tensorcom.FormatError, match="odd"):
        tenbin.decode_list(ref.encode_frames([np.zeros(3)])[:1])
    with pytest.raises(tensorcom.FormatError):
        tenbin.read(io.BytesIO(good[:-80]))


def test_bad_arguments():
    with pytest.raises(tensorcom.ArgumentError, match="bool"):
        tenbin.encode_buffer([np.zeros(3, bool)])
    with pytest.raises(tensorcom.ArgumentError):
        tenbin.encode_buffer([np.zeros(3)], infos=["123456789"])
    with pytest.raises(tensorcom.ArgumentError, match="infos"):
        tenbin.encode_buffer([np.zeros(3)], infos=["a", "b"])
    with pytest.raises(tensorcom.ArgumentError, match="list of arrays"):
        tenbin.encode_buffer(np.zeros(3))
    with pytest.raises(ValueError, match=r"\.ten"):
        tenbin.save("/tmp/x.npy", np.zeros(3))


def test_io_error_carries_errno(tmp_path):
    with pytest.raises(tensorcom.IoError) as info:
        tenbin.load(str(tmp_path / "missing.ten"))
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOENT
    assert "missing.ten" in str(info.value)


# --- tenbin: zero copy -----------------------------------------------------------------

def test_decoded_arrays_view_their_input():
    arrays = [np.arange(1000, dtype=np.float32), np.arange(10, dtype=np.int64)]
    buf = tenbin.encode_buffer(arrays)
    decoded = tenbin.decode_buffer(buf)
    whole = np.frombuffer(buf, np.uint8)
    assert all(np.shares_memory(a, whole) for a in decoded)
    assert decoded[0].flags.writeable  # a bytearray is writable
    decoded[0][0] = 42
    assert tenbin.decode_buffer(buf)[0][0] == 42
    with pytest.raises(BufferError):
        buf.clear()  # the arrays hold the buffer's export
    del whole
    from_bytes = tenbin.decode_buffer(bytes(buf))
    assert not from_bytes[0].flags.writeable
    frames = tenbin.encode_list(arrays)
    assert np.shares_memory(np.asarray(frames[1]), arrays[0])  # data frames are the arrays


def test_decoded_arrays_keep_their_input_alive():
    arrays = tenbin.decode_buffer(bytearray(ref.encode_buffer([np.arange(100000, dtype=np.int64)])))
    a = arrays[0][5:]
    del arrays
    gc.collect()
    np.testing.assert_array_equal(a, np.arange(5, 100000))


def test_loaded_files_are_private_mappings(tmp_path):
    path = str(tmp_path / "m.ten")
    tenbin.save(path, np.arange(100, dtype=np.int32))
    before = open(path, "rb").read()
    (a,) = tenbin.load(path)
    assert a.flags.writeable and not a.flags.owndata
    a[:] = -1
    assert open(path, "rb").read() == before
    assert same(tenbin.load(path), [np.arange(100, dtype=np.int32)])


# --- Connection --------------------------------------------------------------------------

@pytest.mark.parametrize("multipart", [True, False])
def test_send_and_receive(ipc_dir, multipart):
    rng = np.random.default_rng(2)
    arrays = sample_arrays(rng)
    infos = [f"i{k}" for k in range(len(arrays))]
    with pair(ipc_dir, multipart=multipart, epoch=77) as (push, pull):
        push.send(arrays, infos=infos)
        push.send(arrays[:2])
        batch, got = pull.recv(infos=True)
        assert same(batch, arrays) and got == infos
        assert same(pull.recv(), arrays[:2])
        assert pull.recv(timeout=0.05) is None
        assert len(pull) == 77
        assert pull.stats.batches == 2 and push.stats.batches == 2
        assert isinstance(batch[-1].base, object) and not batch[-1].flags.owndata


def test_arrays_sent_without_copy_are_held_until_written(ipc_dir):
    big = np.arange(1 << 20, dtype=np.float32)
    with pair(ipc_dir) as (push, pull):
        before = sys.getrefcount(big)
        push.send([big], copy=False)
        # ZeroMQ holds the array itself until the frame is written; the owner
        # it drops on its own thread is released at the next call.
        deadline = time.monotonic() + TIMEOUT_S
        (got,) = pull.recv()
        np.testing.assert_array_equal(got, big)
        while sys.getrefcount(big) != before and time.monotonic() < deadline:
            push.send([np.zeros(1, np.float32)])
            pull.recv()
        assert sys.getrefcount(big) == before


def test_received_arrays_outlive_connection_and_batch(ipc_dir):
    with pair(ipc_dir) as (push, pull):
        push.send([np.arange(50000, dtype=np.int32), np.ones(3, np.uint8)])
        batch = pull.recv()
    keep = batch[0][100:]
    del batch, push, pull
    gc.collect()
    np.testing.assert_array_equal(keep, np.arange(100, 50000))


def test_iteration_total_and_transforms(ipc_dir):
    with pair(ipc_dir, total=3, batch_transforms=[lambda a: a * 2, None],
              converters=[lambda a: a + 1, lambda a: a.tolist()]) as (push, pull):
        for i in range(4):
            push.send([np.array([i], np.int32), np.array([i, i], np.int16)])
        got = list(pull)
    assert [(b[0].tolist(), b[1]) for b in got] == [([2 * i + 1], [i, i]) for i in range(3)]


def test_timeouts(ipc_dir):
    silent = tensorcom.Connection(f"zpull+ipc://{ipc_dir}/silent", timeout=0.2)
    start = time.monotonic()
    with pytest.raises(tensorcom.TimeoutError) as info:
        next(iter(silent))
    assert 0.15 < time.monotonic() - start < 5
    e = info.value
    assert isinstance(e, TimeoutError) and isinstance(e, tensorcom.TransportError) and "silent" in str(e)
    with pytest.raises(TimeoutError):
        silent.recv()
    assert silent.recv(timeout=0.01) is None
    silent.close()


def test_close_from_another_thread_ends_a_send_waiting_for_a_receiver(ipc_dir):
    """A PUSH with no receiver blocks in send(); close() from another thread
    returns within a second and the send raises TransportError, instead of
    both waiting on each other for ever."""
    push = tensorcom.Connection(f"zrpush+ipc://{ipc_dir}/nobody", linger=0)
    errors = []

    def sender():
        try:
            push.send([np.zeros(4, np.uint8)])
        except tensorcom.TransportError as e:
            errors.append(e)

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    time.sleep(0.3)  # in send(), waiting
    assert thread.is_alive()
    start = time.monotonic()
    push.close()
    thread.join(5)
    assert not thread.is_alive(), "the send never ended"
    assert time.monotonic() - start < 2
    assert len(errors) == 1 and "closed" in str(errors[0])


def test_a_signal_interrupts_a_send_waiting_for_a_receiver(ipc_dir):
    push = tensorcom.Connection(f"zrpush+ipc://{ipc_dir}/nobody-either", linger=0)
    main = threading.main_thread().ident
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            push.send([np.zeros(4, np.uint8)])
    finally:
        timer.cancel()
        push.close()


def test_signal_interrupts_a_blocked_receive(ipc_dir):
    silent = tensorcom.Connection(f"zpull+ipc://{ipc_dir}/quiet")
    main = threading.main_thread().ident
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            silent.recv(timeout=20)
    finally:
        timer.cancel()
        silent.close()
    assert time.monotonic() - start < 10


def test_64bit_arrays_are_sent_only_when_allowed(ipc_dir):
    with pair(ipc_dir, allow64=False) as (push, pull):
        for dtype in ("float64", "int64", "uint64"):
            with pytest.raises(ValueError, match=f"array 1 is {dtype}: .*allow64=True"):
                push.send([np.zeros(2, np.uint8), np.zeros(2, dtype)])
        push.send([np.arange(3, dtype=np.int64)], allow64=True)
        np.testing.assert_array_equal(pull.recv()[0], np.arange(3))
        push.send([np.zeros(2, np.float32), np.zeros(2, np.int32)])
        assert [a.dtype for a in pull.recv()] == [np.float32, np.int32]


def test_noexpand_takes_urls_literally(ipc_dir):
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/n{{1,2}}", noexpand=True, timeout=TIMEOUT_S) as pull:
        assert pull.urls == [f"zpull+ipc://{ipc_dir}/n{{1,2}}"]
        assert os.path.exists(f"{ipc_dir}/n{{1,2}}")
        with tensorcom.Connection(f"zpush+ipc://{ipc_dir}/n{{1,2}}", noexpand=True) as push:
            push.send([np.ones(2, np.uint8)])
            assert pull.recv()[0].tolist() == [1, 1]
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/m{{1,2}}") as expanded:
        assert len(expanded.urls) == 2


def test_options_that_cannot_apply_are_refused(ipc_dir):
    with pytest.raises(tensorcom.ArgumentError, match="converters or device"):
        tensorcom.Connection(f"zpull+ipc://{ipc_dir}/r", device="cpu", converters="torch")
    with pytest.raises(tensorcom.ArgumentError, match="unknown device"):
        tensorcom.Connection(f"zpull+ipc://{ipc_dir}/r", device="tpu")


def test_connection_errors(ipc_dir):
    with pytest.raises(tensorcom.UrlError, match="bogus") as info:
        tensorcom.Connection("bogus://127.0.0.1:1")
    assert isinstance(info.value, ValueError)
    pull = tensorcom.Connection(f"zpull+ipc://{ipc_dir}/e")
    with pytest.raises(tensorcom.TransportError, match="not possible"):
        pull.send([np.zeros(1, np.float32)])
    with pytest.raises(tensorcom.UrlError):
        pull.connect("zpush://127.0.0.1:1")  # more URLs must fit the socket
    pull.close()
    with pytest.raises(tensorcom.TransportError, match="closed"):
        pull.recv()
    unconnected = tensorcom.Connection()
    with pytest.raises(tensorcom.ArgumentError, match="connect"):
        unconnected.recv()
    with pytest.raises(tensorcom.ArgumentError, match="converter"):
        tensorcom.Connection(converters="nonesuch")
    with pytest.raises(tensorcom.ArgumentError, match="timeout"):
        tensorcom.Connection(f"zpull+ipc://{ipc_dir}/t", timeout=-1)


def test_tcp_port_zero_and_brace_expansion(ipc_dir):
    with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/b{{1,2}}", timeout=TIMEOUT_S) as pull, \
            tensorcom.Connection(f"zpush+ipc://{ipc_dir}/b2") as push:
        assert len(pull.urls) == 2
        push.send([np.arange(3, dtype=np.int32)])
        np.testing.assert_array_equal(pull.recv()[0], np.arange(3))
    with tensorcom.Connection("zpull://127.0.0.1:0", timeout=TIMEOUT_S) as pull:
        (address,) = pull.bound_addresses
        port = int(address.rsplit(":", 1)[1])
        assert port > 0
        with tensorcom.Connection(f"zpush://127.0.0.1:{port}") as push:
            push.send([np.ones(4, np.float32)])
            assert pull.recv()[0].tolist() == [1, 1, 1, 1]


# --- against a reference-style ZeroMQ peer and serve-ten ------------------------------

def test_reference_peer_over_zeromq(ipc_dir):
    zmq = pytest.importorskip("zmq")
    arrays = sample_arrays(np.random.default_rng(3))
    context = zmq.Context()
    try:
        # The peer sends (multipart and single buffer) to our PULL.
        with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/r", timeout=TIMEOUT_S) as pull:
            peer = context.socket(zmq.PUSH)
            peer.setsockopt(zmq.LINGER, 0)
            peer.connect(f"ipc://{ipc_dir}/r")
            peer.send_multipart(ref.encode_frames(arrays))
            peer.send(ref.encode_buffer(arrays))
            assert same(pull.recv(), arrays) and same(pull.recv(), arrays)
            peer.close()
        # We send to the peer's PULL; it decodes what we sent.
        sink = context.socket(zmq.PULL)
        sink.setsockopt(zmq.LINGER, 0)
        sink.setsockopt(zmq.RCVTIMEO, TIMEOUT_S * 1000)
        port = sink.bind_to_random_port("tcp://127.0.0.1")
        for multipart in (True, False):
            with tensorcom.Connection(f"zpush://127.0.0.1:{port}", multipart=multipart, allow64=True) as push:
                push.send(arrays)
                assert same(ref.decode_message(sink.recv_multipart()), arrays)
    finally:
        # Closing every socket first keeps a failed assertion from hanging term().
        context.destroy(linger=0)


@contextmanager
def serve_ten(path, *extra):
    if not os.access(SERVE_TEN, os.X_OK):
        pytest.fail(f"{SERVE_TEN} is missing: set TENSORCOM_BUILD_DIR to the meson build dir")
    proc = subprocess.Popen([SERVE_TEN, "-i", str(path), "--epochs", "1", *extra, "zrpush://127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()  # the first line names the bound port
        m = re.search(r"\[bound tcp://127\.0\.0\.1:(\d+)\]", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield f"zrpull://127.0.0.1:{m.group(1)}", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize("extra", [[], ["--single"]], ids=["multipart", "single"])
def test_from_serve_ten(tmp_path, extra):
    rng = np.random.default_rng(4)
    lists = [[rng.integers(0, 256, (4, 16, 16, 3), dtype=np.uint8), np.arange(4, dtype=np.int32) + i]
             for i in range(5)]
    path = tmp_path / "batches.ten"
    with open(path, "wb") as f:
        for arrays in lists:
            tenbin.write(f, arrays, infos=["img", "cls"])
    with serve_ten(path, *extra) as (url, proc):
        with tensorcom.Connection(url, total=len(lists), timeout=TIMEOUT_S) as c:
            got = list(c)
        assert proc.wait(timeout=TIMEOUT_S) == 0
    assert len(got) == len(lists) and all(same(a, b) for a, b in zip(got, lists))


def test_curve_from_python(ipc_dir, tmp_path):
    """A CURVE server with an allow-list and its clients, from Python."""
    tenbin_exe = os.path.join(BUILD_DIR, "tools", "tenbin")
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    for name in ("server", "allowed/client", "stranger"):
        subprocess.run([tenbin_exe, "keygen", str(tmp_path / name)], check=True, capture_output=True, timeout=30)
    os.rename(allowed / "client_secret", tmp_path / "client_secret")
    url = f"ipc://{ipc_dir}/c"
    server = tensorcom.Connection("zrpush+" + url, curve_secret=tmp_path / "server_secret", curve_allow=allowed,
                                  linger=0)
    stranger = tensorcom.Connection("zrpull+" + url, curve_secret=tmp_path / "stranger_secret",
                                    curve_server=tmp_path / "server", timeout=TIMEOUT_S)
    time.sleep(0.3)  # the stranger's handshake is refused first
    client = tensorcom.Connection("zrpull+" + url, curve_secret=tmp_path / "client_secret",
                                  curve_server=tmp_path / "server", timeout=TIMEOUT_S)
    try:
        for i in range(4):
            server.send([np.full(3, i, dtype=np.int32)])
        assert [int(client.recv()[0][0]) for _ in range(4)] == [0, 1, 2, 3]
        assert stranger.recv(timeout=0.2) is None
        assert server._core().refused_peers >= 1
        with pytest.raises(tensorcom.ArgumentError, match="secret certificate"):
            tensorcom.Connection("zrpull+" + url, curve_server=tmp_path / "server")
    finally:
        for c in (client, stranger, server):
            c.close()


def test_connection_defaults_come_from_the_cpp_options():
    import inspect
    defaults = tensorcom._tensorcom.connection_defaults()
    signature = inspect.signature(tensorcom.Connection).parameters
    for name in ("epoch", "total", "multipart", "timeout", "send_hwm", "recv_hwm", "heartbeat", "heartbeat_timeout",
                 "reconnect", "reconnect_max", "linger", "max_message_size", "stats_horizon"):
        assert signature[name].default == defaults[name], name
