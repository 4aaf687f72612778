"""Code written against NVlabs' Python tensorcom runs unchanged: every public
name of its modules tensorcom, tensorcom.zcom and tensorcom.tenbin, used the
ways its docs, tests and tools use them (written here anew). docs/python.md
lists the compatibility list and the deliberate differences.

Environment as test_bindings.py. No fixed ports: binding URLs use port 0 and
read the bound address back.
"""

import io
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tensorcom
from tensorcom import tenbin, zcom

zmq = pytest.importorskip("zmq")

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
TIMEOUT_S = 10


def bound_port(connection):
    return int(connection.bound_addresses[0].rsplit(":", 1)[1])


def pyzmq_pair():
    """A pyzmq PULL bound on a free port and a PUSH connected to it."""
    context = zmq.Context.instance()
    sink = context.socket(zmq.PULL)
    port = sink.bind_to_random_port("tcp://127.0.0.1")
    source = context.socket(zmq.PUSH)
    source.connect(f"tcp://127.0.0.1:{port}")
    for s in (sink, source):
        s.setsockopt(zmq.LINGER, 0)
    sink.setsockopt(zmq.RCVTIMEO, TIMEOUT_S * 1000)
    return source, sink


# --- the compatibility list -------------------------------------------------------------

TENBIN_NAMES = """bytedata bytelen check_acceptable_input_type check_infos decode_buffer decode_chunks
    decode_header decode_list encode_buffer encode_chunks encode_header encode_list load read read_chunk
    roundup save sctp_recv sctp_send str64 unstr64 write write_chunk zrecv_multipart zrecv_single
    zsend_multipart zsend_single long_to_short short_to_long magic magic_bytes magic_str""".split()
ZCOM_NAMES = """Connection Statistics TensorcomDataset converter_table default_context estimate_bytes listify schemes
    tenbin tonumpy totorch transform_with zconnect""".split()
CONNECTION_METHODS = "batchsize close connect items recv send serve write __iter__ __len__".split()
CONNECTION_ATTRIBUTES = """socket stats multipart infos device allow64 raw epoch total batch_transforms
    batch_count converters count report sampler batch_sampler batch_size context addr""".split()
STATISTICS_NAMES = "add rate throughput recent_rate recent_throughput reset summary horizon start last count " \
                   "total recent".split()


def test_every_public_name_is_there():
    missing = [n for n in TENBIN_NAMES if not hasattr(tenbin, n)]
    missing += [f"zcom.{n}" for n in ZCOM_NAMES if n != "TensorcomDataset" and not hasattr(zcom, n)]
    missing += [f"Connection.{n}" for n in CONNECTION_METHODS if not hasattr(zcom.Connection, n)]
    c = zcom.Connection()
    missing += [f"Connection().{n}" for n in CONNECTION_ATTRIBUTES if not hasattr(c, n)]
    missing += [f"Statistics().{n}" for n in STATISTICS_NAMES if not hasattr(zcom.Statistics(), n)]
    assert not missing
    assert tensorcom.Connection is zcom.Connection
    assert tensorcom.zcom is zcom and tensorcom.tenbin is tenbin


def test_connection_signature_is_the_references():
    import inspect
    params = list(inspect.signature(zcom.Connection).parameters)
    assert params[:14] == ["url", "epoch", "total", "multipart", "infos", "device", "allow64", "raw",
                           "batch_transforms", "batch_count", "converters", "report", "stats_horizon", "noexpand"]
    # The project's own options are keyword-only: positional calls mean what they meant.
    kinds = {p.kind for name, p in inspect.signature(zcom.Connection).parameters.items() if name not in params[:14]}
    assert kinds == {inspect.Parameter.KEYWORD_ONLY}


# --- tenbin, as the reference's test_tenbin.py uses it -------------------------------------

def test_str64():
    assert tenbin.unstr64(tenbin.str64("hello")) == "hello"
    assert tenbin.unstr64(tenbin.str64("")) == ""
    assert tenbin.str64(tenbin.magic_str) == tenbin.magic
    assert tenbin.magic_bytes == b"~TenBin~" == tenbin.magic_str.encode()
    assert tenbin.unstr64(np.int64(tenbin.magic)) == "~TenBin~"
    with pytest.raises(ValueError):
        tenbin.str64("ninechars")


def test_header():
    a = np.random.uniform(size=(12, 19)).astype("f")
    shape, dtype, info = tenbin.decode_header(tenbin.encode_header(a, "data"))
    assert a.shape == shape and a.dtype == dtype and info == "data"
    shape, dtype, info = tenbin.decode_header(tenbin.encode_header(np.zeros((), "u2")))
    assert shape == () and dtype == np.uint16 and info == ""
    with pytest.raises(tensorcom.FormatError):
        tenbin.decode_header(b"\0" * 24)  # dtype code 0


def test_list():
    a = np.random.uniform(size=(12, 19)).astype("f")
    encoded = tenbin.encode_list([a, a], infos=["tensor1", "tensor2"])
    b, c = tenbin.decode_list(encoded, infos=["tensor1", "tensor2"])
    assert (a == b).all() and (a == c).all()
    (b, c), infos = tenbin.decode_list(encoded, infos=True)
    assert infos == ["tensor1", "tensor2"]
    with pytest.raises(ValueError):
        tenbin.decode_list(encoded, infos=["tensor1", "other"])


def test_buffer():
    a = np.random.uniform(size=(1, 3, 4)).astype("float32")
    encoded = tenbin.encode_buffer([a, a], infos=["input", "target"])
    b, c = tenbin.decode_buffer(encoded, infos=["input", "target"])
    assert (a == b).all() and (a == c).all()


def test_save_and_load(tmp_path):
    a = np.random.uniform(size=(7, 7)).astype("float16")
    fname = str(tmp_path / "_temp.ten")
    tenbin.save(fname, a, a, infos=["hello", "world"])
    b, c = tenbin.load(fname, infos=["hello", "world"])
    assert (a == b).all() and (a == c).all()
    with pytest.raises(ValueError):
        tenbin.save(str(tmp_path / "x.npy"), a)
    tenbin.save(str(tmp_path / "x.bin"), a, nocheck=True)
    (b,) = tenbin.load(str(tmp_path / "x.bin"), nocheck=True)
    assert (a == b).all()


def test_chunks():
    a = np.arange(10, dtype=np.int16)
    chunks = [b"abc", bytearray(b""), a, memoryview(b"x" * 64)]
    encoded = tenbin.encode_chunks(chunks)
    assert len(encoded) == sum(16 + tenbin.roundup(tenbin.bytelen(c)) for c in chunks)
    assert [bytes(c) for c in tenbin.decode_chunks(encoded)] == [b"abc", b"", a.tobytes(), b"x" * 64]
    # The single-buffer encoding is the header and data frames as chunks.
    arrays = [np.ones((2, 3), np.float32), np.arange(5, dtype=np.uint8)]
    assert tenbin.encode_chunks(tenbin.encode_list(arrays, ["x", "y"])) == tenbin.encode_buffer(arrays, ["x", "y"])
    decoded = tenbin.decode_list(tenbin.decode_chunks(tenbin.encode_buffer(arrays)))
    assert all((x == y).all() for x, y in zip(arrays, decoded))
    with pytest.raises(tensorcom.FormatError):
        tenbin.decode_chunks(b"~TenBiX~" + bytes(8))
    with pytest.raises(tensorcom.FormatError):
        tenbin.decode_chunks(bytes(tenbin.encode_chunks([b"abc"]))[:10])


def test_stream_chunks_and_lists():
    stream = io.BytesIO()
    for payload in (b"", b"a" * 63, b"b" * 64, b"c" * 65):
        tenbin.write_chunk(stream, payload)
    assert stream.tell() == 16 * 4 + 0 + 64 + 64 + 128
    stream.seek(0)
    got = []
    while (chunk := tenbin.read_chunk(stream)) is not None:
        got.append(bytes(chunk))
    assert got == [b"", b"a" * 63, b"b" * 64, b"c" * 65]
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], np.int32)]
    stream = io.BytesIO()
    tenbin.write(stream, arrays, infos=["img", "cls"])
    stream.seek(0)
    (b, c), infos = tenbin.read(stream, infos=True)
    assert (b == arrays[0]).all() and (c == arrays[1]).all() and infos == ["img", "cls"]
    stream.seek(0)
    assert len(tenbin.read(stream, n=1)) == 1
    with pytest.raises(tensorcom.FormatError):
        tenbin.read_chunk(io.BytesIO(b"~TenBin~" + (100).to_bytes(8, "little") + b"short"))


def test_bytes_helpers_and_tables():
    a = np.zeros((3, 4), np.float32)
    assert tenbin.bytelen(a) == 48 and tenbin.bytelen(b"abc") == 3 and tenbin.bytelen(bytearray(5)) == 5
    assert bytes(tenbin.bytedata(a)) == a.tobytes() and tenbin.bytedata(b"ab") == b"ab"
    for bad in (tenbin.bytelen, tenbin.bytedata):
        with pytest.raises(ValueError):
            bad(17)
    assert tenbin.long_to_short["float16"] == "f2" and tenbin.short_to_long["u4"] == "uint32"
    assert len(tenbin.long_to_short) == 11
    assert tenbin.roundup(1) == 64 and tenbin.roundup(64) == 64 and tenbin.roundup(10, 8) == 16
    tenbin.check_acceptable_input_type([a, np.zeros(2, np.int64)], True)
    with pytest.raises(ValueError, match="int64"):
        tenbin.check_acceptable_input_type([a, np.zeros(2, np.int64)], False)
    with pytest.raises(ValueError, match="complex"):
        tenbin.check_acceptable_input_type([np.zeros(2, np.complex64)], True)
    assert tenbin.check_infos([a], ["x"], None) == [a]
    assert tenbin.check_infos([a], ["x"], True) == ([a], ["x"])


def test_zmq():
    source, sink = pyzmq_pair()
    a = np.random.uniform(size=(7, 7)).astype("float16")
    tenbin.zsend_multipart(source, [a, a], infos=["za", "zb"])
    b, c = tenbin.zrecv_multipart(sink, infos=["za", "zb"])
    assert (a == b).all() and (a == c).all()
    tenbin.zsend_single(source, [a], infos=["zc"])
    (b,), infos = tenbin.zrecv_single(sink, infos=True)
    assert (a == b).all() and infos == ["zc"]
    sink.close()
    source.close()


def test_z_functions_on_a_connections_socket(ipc_dir):
    url = f"ipc://{ipc_dir}/z"
    with zcom.Connection("zpull+" + url, timeout=TIMEOUT_S) as sink, zcom.Connection("zpush+" + url) as source:
        a = np.arange(12, dtype=np.int16).reshape(3, 4)
        tenbin.zsend_multipart(source.socket, [a, a], infos=["p", "q"])
        b, c = tenbin.zrecv_multipart(sink.socket, infos=["p", "q"])
        assert (a == b).all() and (a == c).all()
        tenbin.zsend_single(source.socket, [a])
        (b,) = tenbin.zrecv_single(sink.socket)  # either framing is received
        assert (a == b).all()
        # pyzmq-style calls on the socket: frames in, frames out.
        source.socket.send_multipart(tenbin.encode_list([a]))
        frames = sink.socket.recv_multipart()
        assert (tenbin.decode_list(frames)[0] == a).all()
        source.socket.send(tenbin.encode_buffer([a]))
        assert (tenbin.decode_buffer(sink.socket.recv())[0] == a).all()
        with pytest.raises(zmq.Again):
            sink.socket.recv(zmq.NOBLOCK)
        with pytest.raises(tensorcom.UnavailableError, match="Connection argument"):
            sink.socket.setsockopt(zmq.IMMEDIATE, 1)
        assert sink.count == 4 and source.count == 4


def test_sctp_helpers_call_the_socket_as_the_reference_does():
    a = np.arange(4, dtype=np.float32)

    class Peer:
        def sctp_send(self, data, to):
            self.sent = (data, to)

        def accept(self):
            return self, ("127.0.0.1", 1)

        def sctp_recv(self, maxsize):
            return None, None, self.sent[0], None

    peer = Peer()
    tenbin.sctp_send(peer, ("127.0.0.1", 1), [a])
    assert isinstance(peer.sent[0], bytes) and peer.sent[1] == ("127.0.0.1", 1)
    (b,) = tenbin.sctp_recv(peer)
    assert (a == b).all()


# --- zcom, as the reference's test_zcom.py, docs and tools use it ---------------------------

def test_zcom_push_pull():
    sink = zcom.Connection("zpull://127.0.0.1:0", timeout=TIMEOUT_S)
    source = zcom.Connection(f"zpush://127.0.0.1:{bound_port(sink)}")
    a = np.random.uniform(size=(9, 7)).astype("float16")
    source.send([a, a])
    b, c = sink.recv()
    del sink
    del source
    assert (a == b).all() and (a == c).all()


def test_connect_later_and_publish(ipc_dir):
    # docs/simple-server.md: Connection(), then connect(); tensormon: several connect() calls.
    serve = tensorcom.Connection()
    assert serve.socket is None and serve.stats.count == 0
    serve.connect(f"zpub+ipc://{ipc_dir}/pub")
    assert serve.socket is not None and serve.addr.scheme == "zpub+ipc"
    training = tensorcom.Connection(device=None, raw=False, timeout=TIMEOUT_S)
    training.connect(f"zsub+ipc://{ipc_dir}/pub")
    xs, ys = np.zeros((4, 8, 8, 3), np.float16), np.arange(4, dtype=np.int32)
    deadline = time.monotonic() + TIMEOUT_S
    got = None
    while got is None and time.monotonic() < deadline:  # until the subscription has arrived
        serve.send([xs, ys])
        got = training.recv(timeout=0.05)
    assert got is not None and len(got[0]) == 4 and training.batch_size == 4
    serve.close()
    training.close()
    assert serve.socket is None and serve.stats.count >= 1


def test_tensormon_pattern_several_inputs():
    servers = [zcom.Connection("zrpush://127.0.0.1:0") for _ in range(2)]
    source = tensorcom.Connection(device=None, raw=False, timeout=TIMEOUT_S)
    for server in servers:
        source.connect(f"zrpull://127.0.0.1:{bound_port(server)}")
    for i, server in enumerate(servers):
        server.send([np.full((3, 2), i, np.float32), np.zeros(3, np.int32)])
    seen = set()
    for index, batch in enumerate(source.items()):
        bs = len(batch[0])
        seen.add(int(batch[0][0, 0]))
        line = "{:20d} {:8.3f} batches/s {:8.3f} samples/s (batchsize: {:d})".format(index, 1.0, 1.0 * bs, bs)
        assert line.endswith("(batchsize: 3)")
        if index == 1:
            break
    assert seen == {0, 1}
    with pytest.raises(tensorcom.UrlError):
        source.connect("zsub://127.0.0.1:1")  # another kind cannot share the socket
    for c in servers + [source]:
        c.close()


def test_attributes_count_batch_size_total_and_len(ipc_dir):
    url = f"ipc://{ipc_dir}/a"
    with zcom.Connection("zpull+" + url, epoch=77, total=3, timeout=TIMEOUT_S) as sink, \
            zcom.Connection("zpush+" + url) as source:
        assert sink.count == 0 and sink.batch_size == 1 and len(sink) == 77
        assert sink.sampler is None and sink.batch_sampler is None and sink.context is None
        for i in range(5):
            source.write([np.zeros((i + 1, 2), np.uint8)])
        assert source.count == 5
        got = list(sink)
        assert [len(b[0]) for b in got] == [1, 2, 3] and sink.count == 3 and sink.batch_size == 3
        assert list(sink) == []  # count has reached total
        sink.count = 2
        assert [len(b[0]) for b in sink] == [4]
        assert sink.batchsize(got[1]) == 2
        sink.batch_count = False
        assert sink.batchsize(got[1]) == 1


def test_multipart_attribute_picks_the_framing():
    sink = zmq.Context.instance().socket(zmq.PULL)
    port = sink.bind_to_random_port("tcp://127.0.0.1")
    sink.setsockopt(zmq.RCVTIMEO, TIMEOUT_S * 1000)
    arrays = [np.zeros(3, np.float32), np.ones(2, np.int16)]
    with zcom.Connection(f"zpush://127.0.0.1:{port}", infos=["a", "b"]) as source:
        source.send(arrays)
        assert len(sink.recv_multipart()) == 4
        source.multipart = False
        source.send(arrays)
        frames = sink.recv_multipart()
        assert len(frames) == 1 and frames[0][:8] == tenbin.magic_bytes
        _, infos = tenbin.decode_buffer(frames[0], infos=True)
        assert infos == ["a", "b"]
    sink.close(linger=0)


def test_statistics_standalone():
    stats = zcom.Statistics(horizon=3)
    before = time.time()
    assert stats.count == 0 and stats.rate() == 0 and stats.throughput() == 0
    assert stats.recent_rate() == 0 and stats.recent_throughput() == 0 and stats.horizon == 3
    for _ in range(5):
        time.sleep(0.02)
        stats.add(1000)
    assert stats.count == 5 and stats.total == 5000
    assert before - 0.01 <= stats.start <= stats.last <= time.time() + 0.01
    elapsed = stats.last - stats.start
    assert stats.rate() == pytest.approx(5 / elapsed, rel=0.05)
    assert stats.throughput() == pytest.approx(5000 / elapsed, rel=0.05)
    assert len(stats.recent) == 3 and stats.recent[-1][1] == 1000
    assert 10 < stats.recent_rate() < 100 and stats.recent_throughput() == pytest.approx(1000 * stats.recent_rate())
    assert re.fullmatch(r"rate [\d.]+ msg/s throughput [\d.]+e[+-]\d+ bytes/s.*", stats.summary())
    stats.add(7.0)
    assert stats.total == 5007
    for bad in (-1, 0.5, "x"):
        with pytest.raises((ValueError, TypeError)):
            stats.add(bad)
    stats.reset()
    assert stats.count == 0 and stats.total == 0 and stats.start >= before
    assert isinstance(zcom.Statistics(), zcom.Statistics)


def test_connection_statistics_are_live(ipc_dir):
    url = f"ipc://{ipc_dir}/s"
    sink = zcom.Connection("zpull+" + url, stats_horizon=10, timeout=TIMEOUT_S)
    source = zcom.Connection("zpush+" + url)
    for _ in range(3):
        source.send([np.zeros(1000, np.uint8)])
        sink.recv()
    stats = sink.stats
    assert stats.count == 3 and stats.total == 3000 and stats.horizon == 10
    assert stats.blocked_seconds >= 0
    print("count", 3, sink.stats.summary())  # serve-imagenet-dir's line
    sink.stats.reset()
    assert stats.count == 0
    source.send([np.zeros(10, np.uint8)])
    sink.recv()
    source.close()
    sink.close()
    assert stats.count == 1 and sink.stats.total == 10  # readable after close


def test_helpers():
    assert zcom.listify(None) is None and zcom.listify("a") == ["a"] and zcom.listify((1,)) == (1,)
    assert zcom.transform_with([1, 2, 3], [lambda x: x * 10, None]) == [10, 2, 30]
    assert zcom.transform_with([1], None) == [1]
    assert zcom.estimate_bytes(np.zeros(4, np.float32)) == 16 and zcom.estimate_bytes(bytearray(3)) == 3
    assert zcom.estimate_bytes(7) == 8
    assert zcom.schemes["zpush"] == (zmq.PUSH, False) and zcom.schemes["zrsub"] == (zmq.SUB, True)
    assert set(zcom.schemes) == {"zpush", "zpull", "zpub", "zsub", "zrpush", "zrpull", "zrpub", "zrsub"}
    assert set(zcom.converter_table) == {"numpy", "torch", "torch_cuda"}
    a = np.zeros(3)
    assert zcom.converter_table["numpy"](a) is a and zcom.tonumpy()(a) is a


def test_serve_and_items_report(ipc_dir, capsys):
    url = f"ipc://{ipc_dir}/serve"
    with zcom.Connection("zpull+" + url, total=4, timeout=TIMEOUT_S) as sink, \
            zcom.Connection("zpush+" + url) as source:
        source.serve(([np.zeros((2, 2), np.float32)] for _ in range(4)), report=2)
        assert len(list(sink.items(report=2))) == 4
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("count")]
    # Every 2 samples, batches of 2: at 0, 2, 4, 6 on each side.
    assert len(lines) == 8 and all(re.match(r"count \d+ rate [\d.]+ msg/s", l) for l in lines)


def test_pytorch_doc_pattern(ipc_dir):
    torch = pytest.importorskip("torch")
    mean, std = np.array([0.485, 0.456, 0.406], "f"), np.array([0.229, 0.224, 0.225], "f")

    def norm_image(xs):
        return (xs - mean[None, None, :]) / std[None, None, :]

    def norm_cls(ys):
        return ys.astype(np.int64) - 1

    url = f"ipc://{ipc_dir}/pt"
    training = tensorcom.Connection("zpull+" + url, epoch=1000, batch_transforms=[norm_image, norm_cls],
                                    converters="torch", timeout=TIMEOUT_S)
    with zcom.Connection("zpush+" + url) as source:
        source.send([np.full((2, 5, 6, 3), 128, np.uint8), np.array([1, 7], np.int32)])
        xs, ys = next(iter(training))
    assert xs.shape == (2, 3, 5, 6) and xs.dtype == torch.float32
    assert ys.dtype == torch.int64 and ys.tolist() == [0, 6]
    to_numpy = zcom.converter_table["numpy"]
    assert to_numpy(xs).shape == (2, 5, 6, 3) and isinstance(to_numpy(xs), np.ndarray)
    assert zcom.totorch()(np.zeros((4, 4, 3), np.float16)).shape == (3, 4, 4)
    assert zcom.totorch(dtype="float16")(np.zeros(2, np.float32)).dtype == torch.float16
    assert zcom.converter_table["torch"](np.arange(3, dtype=np.int32)).dtype == torch.int64
    training.close()


# --- exit: no waiting for a peer that never came ------------------------------------------

EXIT_SCRIPT = """
import sys, time, numpy as np, tensorcom
kind = sys.argv[1]
if kind == "sub":
    c = tensorcom.Connection("zsub://127.0.0.1:9", timeout=0.2)
    try:
        c.recv()
    except tensorcom.TimeoutError:
        pass
else:
    c = tensorcom.Connection("zpush://127.0.0.1:9")
    c.send([np.zeros(10, np.float32)])
start = time.monotonic()
c.close()
print("%.3f" % (time.monotonic() - start))
"""


@pytest.mark.parametrize("kind", ["sub", "push"])
def test_closing_without_a_peer_does_not_linger(kind):
    # Port 9 (discard) on localhost: nothing listens, the connect never completes.
    out = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, kind], capture_output=True, text=True,
                         timeout=30, env=os.environ)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 0.5, out.stdout  # the linger is 2 s


def test_queued_batches_still_get_their_linger(ipc_dir):
    url = f"ipc://{ipc_dir}/linger"
    sink = zcom.Connection("zpull+" + url, recv_hwm=1, timeout=TIMEOUT_S)
    source = zcom.Connection("zpush+" + url, send_hwm=8, linger=5.0)
    big = [np.ones(16 << 20, np.uint8)]
    source.send([np.zeros(1, np.uint8)])
    sink.recv()  # the peer is there
    for _ in range(4):
        source.send(big)
    closer = threading.Thread(target=source.close)
    start = time.monotonic()
    closer.start()
    time.sleep(0.3)  # the sink reads nothing yet: batches wait in queues
    got = [sink.recv() for _ in range(4)]
    closer.join()
    assert all(b[0].nbytes == 16 << 20 for b in got)
    assert time.monotonic() - start < 5
    sink.close()


def test_meson_devenv_puts_the_package_on_the_path():
    meson = shutil.which("meson")
    if not meson or not BUILD_DIR:
        pytest.skip("needs meson and TENSORCOM_BUILD_DIR")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([meson, "devenv", "-C", BUILD_DIR, sys.executable, "-c",
                          "import tensorcom, os; print(os.path.realpath(tensorcom.__file__))"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(os.path.realpath(os.path.join(BUILD_DIR, "bindings"))), out.stdout
