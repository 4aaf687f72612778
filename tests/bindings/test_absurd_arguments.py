"""Absurd arguments and addresses from Python: each refused at
once with one line naming the argument, never accepted until later; IPv6
hosts in brackets work as the URL docs promise; an unresolvable bound host
says so.

No fixed ports: binding URLs use port 0 and read the bound address back.
"""
import os
import time

import numpy as np
import pytest

import tensorcom

TIMEOUT_S = 10


@pytest.mark.parametrize("name,value", [("timeout", 1e16), ("timeout", -1.0), ("linger", float("nan")),
                                        ("heartbeat", float("inf"))])
def test_absurd_durations_are_refused_naming_the_argument(name, value):
    with pytest.raises(tensorcom.ArgumentError, match=name):
        tensorcom.Connection("zpull://127.0.0.1:0", **{name: value})


def test_tensorcom_dataset_checks_its_arguments_at_once():
    pytest.importorskip("torch")
    with pytest.raises(tensorcom.ArgumentError, match="length"):
        tensorcom.TensorcomDataset("zrpull://127.0.0.1:1", length=-1)
    with pytest.raises(tensorcom.ArgumentError, match="urls"):
        tensorcom.TensorcomDataset(5)
    with pytest.raises(tensorcom.ArgumentError, match="urls"):
        tensorcom.TensorcomDataset([])


def test_bracketed_ipv6_hosts_bind_and_connect():
    if not os.path.exists("/proc/net/if_inet6"):
        pytest.skip("no IPv6 on this machine")
    with tensorcom.Connection("zpub://[::1]:0") as pub:
        port = pub.bound_addresses[0].rsplit(":", 1)[1]
        assert pub.bound_addresses[0].startswith("tcp://[::1]:")
        with tensorcom.Connection(f"zsub://[::1]:{port}", timeout=TIMEOUT_S) as sub:
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                pub.send([np.arange(3, dtype=np.int32)])
                got = sub.recv(timeout=0.1)
                if got is not None:
                    break
                assert time.monotonic() < deadline, "nothing arrived over [::1]"
            assert list(got[0]) == [0, 1, 2]


def test_an_unresolvable_host_to_bind_says_so():
    with pytest.raises(tensorcom.TransportError, match="no such host"):
        tensorcom.Connection("zpull://no-such-host.invalid:0")


def test_special_files_are_refused_where_python_reads_them(tmp_path):
    fifo = tmp_path / "fifo.ten"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(tensorcom.IoError, match="FIFO"):
        tensorcom.tenbin.load(str(fifo))
    with pytest.raises(tensorcom.IoError, match="FIFO"):
        tensorcom.Connection("zpull://127.0.0.1:0", curve_secret=str(fifo))
    zero = tmp_path / "zero"
    os.symlink("/dev/zero", zero)
    with pytest.raises(tensorcom.IoError, match="character device"):
        tensorcom.Connection("zpull://127.0.0.1:0", curve_secret=str(zero))
    assert time.monotonic() - start < 5
