"""Special files and absurd values given by a careless operator:
FIFOs and symlinks to devices are refused at once in one line, never read
until memory runs out or waited on forever; make-shards leaves out an image
too large to hold and refuses class folders classes.json cannot name,
keeping an existing classes.json whole; tenbin synth refuses counts it would
write until the disk is full and leaves no partial file when stopped; tenbin
info prints infos without their control bytes.

Environment: TENSORCOM_BUILD_DIR, the meson build dir. Every run is bounded.
"""
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
TENBIN = os.path.join(BUILD_DIR, "tools", "tenbin")
TENSORSHOW = os.path.join(BUILD_DIR, "tools", "tensorshow")
MAKE_SHARDS = os.path.join(BUILD_DIR, "tools", "make_shards", "make-shards")
RUN_TIMEOUT_S = 20

if not os.access(TENBIN, os.X_OK):
    pytest.skip(f"no tenbin binary at {TENBIN!r} (set TENSORCOM_BUILD_DIR)", allow_module_level=True)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL, **kw)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return str(path)


@pytest.fixture
def zero_link(tmp_path):
    path = tmp_path / "zero"
    os.symlink("/dev/zero", path)
    return str(path)


def refused_in_one_line(done, kind):
    assert done.returncode != 0
    assert kind in done.stderr and "not a regular file" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2, done.stderr


@pytest.mark.parametrize("special,kind", [("fifo", "a FIFO"), ("zero_link", "a character device")])
def test_tenbin_check_and_info_refuse_special_files(special, kind, request):
    path = request.getfixturevalue(special)
    for command in ("check", "info"):
        refused_in_one_line(run([TENBIN, command, path]), kind)


@pytest.mark.parametrize("special,kind", [("fifo", "a FIFO"), ("zero_link", "a character device")])
def test_a_curve_secret_that_is_a_special_file_is_refused(special, kind, request):
    path = request.getfixturevalue(special)
    serve_ten = os.path.join(BUILD_DIR, "servers", "serve-ten")
    done = run([serve_ten, "--curve-secret", path, "-i", "/nonexistent.ten", "zpub://127.0.0.1:0"])
    refused_in_one_line(done, kind)
    assert "CURVE certificate" in done.stderr


@pytest.mark.parametrize("special,kind", [("fifo", "a FIFO"), ("zero_link", "a character device")])
def test_tensorshow_class_table_that_is_a_special_file_is_refused(special, kind, request, tmp_path):
    if not os.access(TENSORSHOW, os.X_OK):
        pytest.skip("tensorshow was not built (no OpenCV)")
    path = request.getfixturevalue(special)
    done = run([TENSORSHOW, "-C", path, "-n", "1", "-o", str(tmp_path / "x.png"), "-t", "1",
                "zsub://127.0.0.1:1"])
    refused_in_one_line(done, kind)


def test_tenbin_info_prints_infos_without_control_bytes(tmp_path):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import tenbin_ref as tb
    path = tmp_path / "escape.ten"
    path.write_bytes(tb.encode_buffer([np.zeros(2, np.uint8)], infos=["\x1b[2J\x07x"]))
    done = run([TENBIN, "info", str(path)])
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "x" in done.stdout


@pytest.mark.parametrize("count", ["-1", "0", "18446744073709551615", "1e99"])
def test_tenbin_synth_refuses_absurd_counts(count, tmp_path):
    out = tmp_path / "s.ten"
    done = run([TENBIN, "synth", "-b", "1", "-s", "8", "-n", count, "-o", str(out)])
    assert done.returncode != 0
    assert "count" in done.stderr or "-n" in done.stderr, done.stderr
    assert not os.listdir(tmp_path)


def test_a_stopped_tenbin_synth_leaves_no_partial_file(tmp_path):
    out = tmp_path / "s.ten"
    proc = subprocess.Popen([TENBIN, "synth", "-b", "64", "-s", "224", "-n", "100000", "-o", str(out)],
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not os.path.exists(str(out) + ".partial") and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0 and "stopped" in err, err
    assert os.listdir(tmp_path) == []


# --- make-shards --------------------------------------------------------------------------------

needs_make_shards = pytest.mark.skipif(not os.access(MAKE_SHARDS, os.X_OK), reason="make-shards not built")


def small_jpeg():
    import cv2
    ok, data = cv2.imencode(".jpg", np.full((16, 16, 3), 128, np.uint8))
    assert ok
    return data.tobytes()


@needs_make_shards
def test_make_shards_leaves_out_an_image_too_large_to_hold(tmp_path):
    root = tmp_path / "in"
    (root / "a").mkdir(parents=True)
    (root / "a" / "ok.jpg").write_bytes(small_jpeg())
    with open(root / "a" / "big.jpg", "wb") as f:  # 1 GiB, sparse: costs no disk
        f.truncate(1 << 30)
    out = tmp_path / "out"
    done = run([MAKE_SHARDS, str(root), "-o", str(out / "s-%03d.tar"), "--max-member-bytes", str(64 << 20)])
    assert done.returncode == 0, done.stderr
    assert "big.jpg" in done.stderr and "left out" in done.stderr
    assert "images left out (larger than --max-member-bytes): 1" in done.stdout
    import tarfile
    with tarfile.open(out / "s-000.tar") as tar:
        assert sorted(m.name.split(".")[-1] for m in tar.getmembers()) == ["cls", "jpg"]


@needs_make_shards
def test_make_shards_refuses_a_latin1_class_folder_and_keeps_classes_json(tmp_path):
    root = tmp_path / "in"
    latin1 = "caf\xe9".encode("latin-1")
    os.makedirs(os.path.join(bytes(root), latin1))
    with open(os.path.join(bytes(root), latin1, b"x.jpg"), "wb") as f:
        f.write(small_jpeg())
    out = tmp_path / "out"
    out.mkdir()
    (out / "classes.json").write_text(json.dumps(["old"]) + "\n")
    done = run([MAKE_SHARDS, str(root), "-o", str(out / "s-%03d.tar")])
    assert done.returncode != 0
    assert "UTF-8" in done.stderr and len(done.stderr.strip().splitlines()) <= 2, done.stderr
    assert json.loads((out / "classes.json").read_text()) == ["old"]


@needs_make_shards
@pytest.mark.parametrize("special,kind", [("fifo", "a FIFO"), ("zero_link", "a character device")])
def test_make_shards_refuses_a_special_list_or_image(special, kind, request, tmp_path):
    path = request.getfixturevalue(special)
    out = tmp_path / "out"
    refused_in_one_line(run([MAKE_SHARDS, "--list", path, "-o", str(out / "s-%03d.tar")]), kind)
    image = tmp_path / "image.jpg"  # a list names images by their extension
    os.symlink(path, image)
    listing = tmp_path / "list.txt"
    listing.write_text(f"{image} 0\n")
    done = run([MAKE_SHARDS, "--list", str(listing), "-o", str(out / "t-%03d.tar")])
    refused_in_one_line(done, kind)


def test_programs_raise_their_open_file_limit_to_the_hard_one():
    """Peers holding connections open must not leave a server without
    descriptors for its shards: the soft limit (often 1024) goes up to the
    hard one at start."""
    import resource

    def low_soft_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))

    serve_ten = os.path.join(BUILD_DIR, "servers", "serve-ten")
    ten = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"limits-{os.getpid()}.ten")
    assert run([TENBIN, "synth", "-b", "1", "-s", "8", "-o", ten]).returncode == 0
    proc = subprocess.Popen([serve_ten, "-i", ten, "zpub://127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=low_soft_limit)
    try:
        proc.stdout.readline()  # bound: it now waits for a subscriber
        with open(f"/proc/{proc.pid}/limits") as limits:
            line = next(l for l in limits if l.startswith("Max open files"))
        assert line.split()[3:5] == ["4096", "4096"], line
    finally:
        proc.kill()
        proc.wait()
        os.unlink(ten)


@pytest.mark.parametrize("program", ["serve-ten", "serve-imagenet-shards", "tensormon", "tenbin-record"])
def test_inproc_urls_are_refused_at_once(program, tmp_path):
    """A program alone in its process has no other end on inproc://: it
    would wait forever, silently. Refused with one line naming the URL."""
    ten = tmp_path / "x.ten"
    assert run([TENBIN, "synth", "-o", str(ten), "-n", "1", "-b", "1", "-s", "2"]).returncode == 0
    url = "zpub+inproc://x" if program.startswith("serve") else "zsub+inproc://x"
    args = {
        "serve-ten": [os.path.join(BUILD_DIR, "servers", "serve-ten"), "-i", str(ten), url],
        "serve-imagenet-shards": [os.path.join(BUILD_DIR, "servers", "serve-imagenet-shards"), "-u",
                                  str(tmp_path / "none.tar"), url],
        "tensormon": [os.path.join(BUILD_DIR, "tools", "tensormon"), url],
        "tenbin-record": [TENBIN, "record", "-o", str(tmp_path / "out.ten"), "-n", "1", url],
    }[program]
    start = time.monotonic()
    done = run(args)
    assert time.monotonic() - start < 10
    assert done.returncode != 0, done
    assert "inproc://" in done.stderr and "ipc://" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
