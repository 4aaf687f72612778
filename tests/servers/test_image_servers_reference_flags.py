"""The reference's command lines: its servers' flags, with their meanings, and
the rate in the report lines.

Run: TENSORCOM_BUILD_DIR=build pytest-3 -q -p no:cacheprovider tests/servers/test_image_servers_reference_flags.py
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_helpers as h  # noqa: E402
from image_server_data import run, check_batches  # noqa: E402

COMMON = ["--epochs", "1", "--size", "32", "-r", "0"]
# summary() never computes a rate over less than this many seconds.
SHORTEST_RATE_SPAN_S = 0.5


def workers_in_first_line(r):
    m = re.search(r", (\d+) workers, batches of (\d+) on ", r.out)
    assert m, r
    return int(m.group(1)), int(m.group(2))


# --- serve-imagenet-shards --------------------------------------------------------

def test_shards_url_and_batch_size_are_the_reference_names(clean_data, rundir):
    paths, labels = clean_data
    r = run(["--url", paths[0], "--batch-size", "7", "--meta"] + COMMON, rundir)
    assert r.rc == 0, r
    assert [b[0].shape[0] for b in r.batches] == [7, 7, 6], r
    assert sorted(r.keys()) == sorted(k for k in labels if k.startswith("c0_"))


@pytest.mark.parametrize("switch", ["--shuffle", "-S"])
def test_shards_bare_shuffle_switch_before_the_address(clean_data, rundir, switch):
    """The reference's -S/--shuffle takes no value: the address comes next."""
    paths, labels = clean_data
    r = run(["-u", paths[0], "--meta", "-b", "5"] + COMMON + [switch], rundir)
    assert r.rc == 0, r
    assert sorted(r.keys()) == sorted(k for k in labels if k.startswith("c0_"))


def test_shards_shuffle_still_takes_a_buffer_size(clean_data, rundir):
    paths, _ = clean_data
    r = run(["-u", paths[0], "--shuffle", "3", "-b", "5"] + COMMON, rundir)
    assert r.rc == 0, r
    assert r.summary()[:2] == (20, 4)


@pytest.mark.parametrize("args,workers", [(["-N", "3"], 3), (["--num-workers", "2"], 2), (["-p", "2"], 2),
                                          (["--parallel", "2", "-N", "3"], 6), (["-p", "0", "-N", "0"], None)])
def test_shards_parallel_and_num_workers_set_the_workers(clean_data, rundir, args, workers):
    paths, _ = clean_data
    r = run(["-u", paths[0], "-b", "5"] + COMMON + args, rundir)
    assert r.rc == 0, r
    got, batch = workers_in_first_line(r)
    assert batch == 5
    assert got == (workers if workers is not None else (os.cpu_count() or 1)), r


@pytest.mark.parametrize("exe,args", [(h.SHARDS_EXE, ["-N", "2", "-w", "3"]), (h.SHARDS_EXE, ["-p", "2", "--workers", "2"]),
                                      (h.DIR_EXE, ["-P", "2", "-w", "3"])])
def test_workers_given_twice_is_refused_naming_the_option_to_keep(clean_data, folder, exe, args):
    source = ["-u", clean_data[0][0]] if exe == h.SHARDS_EXE else ["-d", folder[0]]
    rc, out, err = h.run_plain(source + args + ["zpush+ipc:///tmp/tcs-nothing"], exe=exe)
    assert rc == 2, (rc, out, err)
    assert len(err.splitlines()) == 1 and "give only --workers" in err, err


def test_benchmark_repeats_the_first_batch(clean_data, rundir):
    """-B: the first batch over and over, until stopped (the reference's benchmark mode)."""
    paths, _ = clean_data
    sock = os.path.join(rundir, "b")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    pull.bind("ipc://" + sock)
    proc = subprocess.Popen([h.SHARDS_EXE, "-u", paths[0], "-B", "--meta", "-b", "4", "--size", "32", "-r", "0",
                             "--epochs", "1", "zpush+ipc://" + sock],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        batches = []
        while len(batches) < 12:  # more than the 5 batches the epoch holds
            assert pull.poll(10000), f"only {len(batches)} batches"
            batches.append(h.tb.decode_message(pull.recv_multipart()))
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        h.close_server(proc, pull, ctx)
    first = batches[0]
    for b in batches[1:]:
        assert all((x == y).all() for x, y in zip(b, first))
    assert proc.returncode in (0, 130), (proc.returncode, err)


# --- serve-imagenet-dir -----------------------------------------------------------

def test_dir_serves_in_directory_order_without_S(folder, rundir):
    d, files = folder
    r = run(["-d", d, "--meta", "--batch-size", "5", "-w", "1"] + COMMON, rundir, exe=h.DIR_EXE)
    assert r.rc == 0, r
    check_batches(r, 32, 5)
    keys = [os.path.normpath(k) for k in r.keys()]
    assert keys == sorted(files["train"]), keys  # ImageFolder's order: classes, then files, sorted


@pytest.mark.parametrize("switch", ["-S", "--no-shuffle", "--shuffle"])
def test_dir_S_shuffles(folder, rundir, switch):
    """The reference's -S (its dest is no_shuffle, but it turns shuffling on)."""
    d, files = folder
    r = run(["-d", d, "--meta", "-b", "4", "-w", "1"] + COMMON + [switch], rundir, exe=h.DIR_EXE)
    assert r.rc == 0, r
    keys = [os.path.normpath(k) for k in r.keys()]
    assert sorted(keys) == sorted(files["train"]) and keys != sorted(files["train"]), keys


def test_dir_parallel_sets_the_workers(folder, rundir):
    r = run(["-d", folder[0], "-P", "3"] + COMMON, rundir, exe=h.DIR_EXE)
    assert r.rc == 0, r
    assert workers_in_first_line(r)[0] == 3


def test_dir_normalize_serves_normalised_float32(folder, rundir):
    d, _ = folder
    plain = run(["-d", d, "-w", "1", "--val", "-b", "6"] + COMMON, rundir, exe=h.DIR_EXE)
    normalised = run(["-d", d, "-w", "1", "--val", "-b", "6", "-n"] + COMMON, rundir, exe=h.DIR_EXE)
    assert plain.rc == 0 and normalised.rc == 0, (plain, normalised)
    check_batches(normalised, 32, 6, dtype="float32")
    for u8, f32 in zip(plain.images, normalised.images):
        assert abs(h.normalise(u8) - f32).max() < 1e-4


def test_dir_normalize_with_another_dtype_is_refused(folder):
    rc, out, err = h.run_plain(["-d", folder[0], "-n", "--dtype", "uint8", "zpush+ipc:///tmp/tcs-nothing"],
                               exe=h.DIR_EXE)
    assert rc == 2 and "--dtype float32" in err and len(err.splitlines()) == 1, (rc, err)


def test_dir_defaults_to_imagenet_in_the_working_directory(folder, rundir):
    cwd = tempfile.mkdtemp(dir=rundir, prefix="cwd")
    rc, out, err = h.run_plain(["--epochs", "1", "zpush+ipc:///tmp/tcs-nothing"], exe=h.DIR_EXE, cwd=cwd)
    assert rc == 1, (rc, out, err)
    assert err == "serve-imagenet-dir: no ImageFolder root './imagenet' (the default of -d; give yours with -d DIR): " \
                  "No such file or directory\n", err
    shutil.copytree(folder[0], os.path.join(cwd, "imagenet"))
    r = run(COMMON + ["-b", "4"], rundir, exe=h.DIR_EXE, cwd=cwd)
    assert r.rc == 0, r
    assert r.summary()[:2] == (12, 3)


# --- the report lines' rates ------------------------------------------------------

@pytest.mark.parametrize("extra", [[], ["-B"]])
def test_report_lines_never_rate_a_burst(clean_data, rundir, extra):
    """The first batches leave at once (they queue up to the high-water marks):
    a rate over their span was once 200,000 batches/s. No rate is computed over
    less than half a second, so n batches can never read as more than 2n a second."""
    paths, _ = clean_data
    r = run(["-u", paths[0], "-b", "2", "--size", "32", "-r", "2", "--epochs", "2"] + extra, rundir,
            stop_after=40 if extra else None)
    lines = re.findall(r": (\d+) batches, \d+ images; rate ([\d.]+) msg/s throughput ([\d.e+-]+) bytes/s", r.out)
    assert len(lines) >= 5, r
    batch_bytes = 2 * 32 * 32 * 3 + 2 * 4
    for n, rate, throughput in lines:
        n, rate, throughput = int(n), float(rate), float(throughput)
        assert rate <= n / SHORTEST_RATE_SPAN_S + 1e-6, (n, rate, r.out)
        assert throughput <= n * batch_bytes * 1.1 / SHORTEST_RATE_SPAN_S  # 10%: the headers, (n, throughput, r.out)
