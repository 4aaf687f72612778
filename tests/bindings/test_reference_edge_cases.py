"""Reference code runs unchanged at its edges: no abort at exit whatever a
daemon thread is doing, a refilled send buffer delivers what was in it at
send time, a burst over PUB all arrives while queues stay bounded in
bytes, the first batch comes soon after a late server binds, the names
zcom.tenbin, zcom.zconnect and zcom.default_context, receivers that check
their infos, socket options and polling as pyzmq code does them, and raw=True
as the reference behaves.

No fixed ports: binding URLs use port 0 and read the bound address back, or
ipc:// paths in a temp dir.
"""

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tensorcom
from tensorcom import tenbin, zcom

zmq = pytest.importorskip("zmq")

TIMEOUT_S = 10


def bound_port(connection):
    return int(connection.bound_addresses[0].rsplit(":", 1)[1])


def run_python(code, timeout=60):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)


# --- exit ---------------------------------------------------------------------------------

DAEMON_SENDER_AT_EXIT = """
    import threading, time, numpy as np, tensorcom
    sink = tensorcom.Connection("zpull://127.0.0.1:0")
    port = sink.bound_addresses[0].rsplit(":", 1)[1]
    source = tensorcom.Connection(f"zpush://127.0.0.1:{port}", copy=COPY)
    batch = np.zeros((16, 224, 224, 3), np.uint8)
    def send():
        while True:
            source.send([batch])
    def receive():
        while True:
            sink.recv()
    threading.Thread(target=send, daemon=True).start()
    threading.Thread(target=receive, daemon=True).start()
    time.sleep(0.3)
    print("leaving")
"""


@pytest.mark.parametrize("copy", [True, False])
def test_no_abort_when_the_interpreter_ends_under_a_sending_daemon_thread(copy):
    for _ in range(4):
        done = run_python(DAEMON_SENDER_AT_EXIT.replace("COPY", str(copy)))
        assert done.returncode == 0, done.stderr
        assert "leaving" in done.stdout and "terminate" not in done.stderr


# --- send copies ----------------------------------------------------------------------------


def test_a_refilled_send_buffer_delivers_each_batch_as_it_was(ipc_dir):
    url = f"ipc://{ipc_dir}/refill"
    with tensorcom.Connection("zpull+" + url, timeout=TIMEOUT_S) as sink, \
            tensorcom.Connection("zpush+" + url) as source:
        buffer = np.empty((4, 256, 256, 3), np.uint8)
        for i in range(50):
            buffer[...] = i  # the reference's servers refill one buffer
            source.send([buffer])
        for i in range(50):
            (got,) = sink.recv()
            assert got.min() == i and got.max() == i, f"batch {i} holds another batch's pixels"


def test_copy_false_hands_zeromq_the_array_itself(ipc_dir):
    big = np.arange(1 << 20, dtype=np.float32)
    url = f"zpush+ipc://{ipc_dir}/nobody"
    lonely = tensorcom.Connection(url, linger=0, copy=False)
    before = sys.getrefcount(big)
    lonely.send([big])
    assert sys.getrefcount(big) == before + 1  # queued for a peer that never came
    lonely.close()
    assert sys.getrefcount(big) == before
    copying = tensorcom.Connection(url, linger=0)
    copying.send([big])
    assert sys.getrefcount(big) == before
    copying.send([big], copy=False)
    assert sys.getrefcount(big) == before + 1
    copying.close()


# --- queues ---------------------------------------------------------------------------------


def subscribed_pair(recv_hwm=None, **pub_options):
    """A PUB bound on a free port and a SUB connected and known to be subscribed."""
    pub = tensorcom.Connection("zpub://127.0.0.1:0", **pub_options)
    sub_options = {} if recv_hwm is None else {"recv_hwm": recv_hwm}
    sub = tensorcom.Connection(f"zsub://127.0.0.1:{bound_port(pub)}", timeout=TIMEOUT_S, **sub_options)
    probe = [np.zeros(1, np.int32)]
    deadline = time.monotonic() + TIMEOUT_S
    while sub.recv(timeout=0.05) is None:
        assert time.monotonic() < deadline, "the subscriber never got a probe"
        pub.send(probe)
    while sub.recv(timeout=0.2) is not None:
        pass  # probes still on their way
    return pub, sub


def test_a_burst_over_pub_reaches_a_subscriber_that_keeps_up():
    pub, sub = subscribed_pair()
    with pub, sub:
        for i in range(200):
            pub.send([np.full((16, 32), i, np.int32)])
        got = [int(sub.recv()[0][0, 0]) for _ in range(200)]
        assert got == list(range(200))


def test_queues_of_large_batches_are_bounded_in_bytes():
    batch = np.zeros(8 << 20, np.uint8)

    def delivered(queue_bytes):
        pub, sub = subscribed_pair(recv_hwm=2, queue_bytes=queue_bytes)
        with pub, sub:
            for _ in range(40):  # the subscriber does not read while these go out
                pub.send([batch])
            time.sleep(1.0)
            count = 0
            while sub.recv(timeout=0.5) is not None:
                count += 1
            return count

    # 16 MiB: the publisher queues 2 batches, the subscriber 2, socket buffers one or two more.
    assert delivered(16 << 20) <= 8
    assert delivered(0) == 40  # the publisher's count alone (1000) holds all 40


# --- reconnecting ---------------------------------------------------------------------------


def test_the_first_batch_comes_soon_after_a_late_server_binds():
    probe = tensorcom.Connection("zpull://127.0.0.1:0")
    port = bound_port(probe)
    probe.close()  # a free port, released
    with tensorcom.Connection(f"zrpull://127.0.0.1:{port}", timeout=TIMEOUT_S) as trainer:
        time.sleep(1.6)  # the trainer's connects are refused meanwhile
        server = tensorcom.Connection(f"zrpush://127.0.0.1:{port}")
        bound = time.monotonic()
        server.send([np.zeros(4, np.float32)])
        trainer.recv()
        waited = time.monotonic() - bound
        server.close()
    assert waited < 0.8, f"first batch {waited:.2f} s after the server bound"


# --- names, infos, raw ----------------------------------------------------------------------


def test_zcom_has_tenbin_zconnect_and_default_context(ipc_dir):
    assert zcom.tenbin is tenbin
    assert isinstance(zcom.default_context, zmq.Context)
    url = f"ipc://{ipc_dir}/z"
    with zcom.zconnect("zpull+" + url, timeout=TIMEOUT_S) as sink, zcom.zconnect("zpush+" + url) as source:
        source.send([np.arange(3, dtype=np.int16)])
        assert list(sink.recv()[0]) == [0, 1, 2]


def test_a_receiver_checks_the_infos_it_was_given(ipc_dir):
    url = f"ipc://{ipc_dir}/infos"
    with zcom.Connection("zpull+" + url, infos=["image", "label"], timeout=TIMEOUT_S) as sink, \
            zcom.Connection("zpush+" + url) as source:
        a = np.zeros(2, np.int16)
        source.send([a, a], infos=["image", "label"])
        assert len(sink.recv()) == 2
        source.send([a, a], infos=["image", "cls"])
        with pytest.raises(tensorcom.FormatError, match="cls"):
            sink.recv()


def test_raw_is_accepted_and_batches_arrive_decoded_as_with_the_reference(ipc_dir):
    url = f"ipc://{ipc_dir}/raw"
    with zcom.Connection("zpull+" + url, raw=True, timeout=TIMEOUT_S) as sink, \
            zcom.Connection("zpush+" + url) as source:
        a = np.arange(6 * 7, dtype=np.uint16).reshape(6, 7)
        source.send([a])
        batch = next(iter(sink))
        assert len(batch[0]) == 6  # what the reference's tensormon -R prints as batchsize
        source.send([a], infos=["r"])
        frames = sink.socket.recv_multipart()  # undecoded frames are one call away
        assert bytes(frames[0]) == tenbin.encode_header(a, "r")


# --- socket options and polling -------------------------------------------------------------


def test_rcvtimeo_set_on_the_socket_times_out_recv_as_zmq_again(ipc_dir):
    url = f"ipc://{ipc_dir}/timeo"
    with zcom.Connection("zpull+" + url) as sink:
        sink.socket.setsockopt(zmq.RCVTIMEO, 200)
        assert sink.socket.getsockopt(zmq.RCVTIMEO) == 200
        start = time.monotonic()
        with pytest.raises(zmq.Again):
            sink.recv()
        assert 0.15 < time.monotonic() - start < 5
        with pytest.raises(tensorcom.TimeoutError):  # also the project's own
            sink.recv()
        sink.socket.setsockopt(zmq.LINGER, 0)
        sink.socket.setsockopt(zmq.RCVHWM, 100)
        assert sink.socket.getsockopt(zmq.RCVHWM) == 100
        sink.socket.setsockopt(zmq.SUBSCRIBE, b"")
        with pytest.raises(tensorcom.UnavailableError, match="Connection argument"):
            sink.socket.setsockopt(zmq.AFFINITY, 1)


def assert_quiet(socket, poller):
    """Drained: no message, and the descriptor settles. As with ZeroMQ's own
    ZMQ_FD, a wake-up may come with nothing (an I/O thread's late command,
    on a loaded machine); ZMQ_EVENTS then says no message, and the
    descriptor stays quiet after it."""
    if dict(poller.poll(100)):
        assert not socket.getsockopt(zmq.EVENTS) & zmq.POLLIN
        assert dict(poller.poll(100)) == {}


def test_a_pyzmq_poller_sees_every_batch(ipc_dir):
    url = f"ipc://{ipc_dir}/poll"
    with zcom.Connection("zpull+" + url) as sink, zcom.Connection("zpush+" + url) as source:
        poller = zmq.Poller()
        poller.register(sink.socket, zmq.POLLIN)
        source.send([np.zeros(1, np.int32)])
        assert sink.socket in dict(poller.poll(TIMEOUT_S * 1000))
        sink.recv()
        assert_quiet(sink.socket, poller)  # connected and drained
        for i in range(5):  # all queued before the first poll
            source.send([np.full(3, i, np.int32)])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 5 and time.monotonic() < deadline:
            if sink.socket in dict(poller.poll(1000)):
                got.append(int(sink.recv()[0][0]))
        assert got == [0, 1, 2, 3, 4]
        assert_quiet(sink.socket, poller)
        assert sink.socket.poll(100) == 0
        source.send([np.zeros(1, np.int32)])
        assert sink.socket.poll(TIMEOUT_S * 1000) == zmq.POLLIN
        assert sink.socket.getsockopt(zmq.EVENTS) & zmq.POLLIN
