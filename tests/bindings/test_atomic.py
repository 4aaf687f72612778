"""tensorcom.atomic: a file replaced whole or not at all, its mode kept,
no temporary left by an error, and under SIGKILL at random moments always
one of the two contents written, with at most the killed writer's one
temporary beside it (the next write removes it).
"""

import json
import os
import random
import select
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

from tensorcom.atomic import atomic_write, atomic_writer, temporary_prefix


def temporaries(path):
    prefix = temporary_prefix(path)
    return sorted(name for name in os.listdir(os.path.dirname(path)) if name.startswith(prefix))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_bytes_and_text_replace_the_contents_and_leave_no_temporary(tmp_path):
    path = tmp_path / "token.json"
    atomic_write(path, b"first\n")
    assert read(path) == b"first\n"
    atomic_write(str(path), "sécond\n")  # str: UTF-8
    assert read(path) == "sécond\n".encode()
    with atomic_writer(path, "w") as f:
        f.write("third")
        assert read(path) == "sécond\n".encode()  # nothing shows until the block ends
    assert read(path) == b"third"
    with atomic_writer(path) as f:
        f.write(b"\x00\xff")
    assert read(path) == b"\x00\xff"
    assert os.listdir(tmp_path) == ["token.json"]


def test_an_existing_files_mode_is_kept_and_a_new_one_follows_the_umask(tmp_path):
    path = tmp_path / "kept"
    atomic_write(path, b"x")
    os.chmod(path, 0o640)
    atomic_write(path, b"y")
    assert mode_of(path) == 0o640
    os.chmod(path, 0o604)
    atomic_write(path, b"z")
    assert mode_of(path) == 0o604
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new", b"x")
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "new") == 0o640  # 0o666 less the umask, as open() makes it, not mkstemp's 0o600


def test_an_error_leaves_the_file_as_it_was_and_no_temporary(tmp_path):
    path = tmp_path / "model.pt"
    atomic_write(path, b"old")
    with pytest.raises(RuntimeError, match="interrupted"):
        with atomic_writer(path) as f:
            f.write(b"half of the new")
            raise RuntimeError("interrupted")
    with pytest.raises(TypeError):
        with atomic_writer(path) as f:
            f.write("text to a binary file")
    with pytest.raises(KeyboardInterrupt):
        with atomic_writer(path) as f:
            raise KeyboardInterrupt
    assert read(path) == b"old" and os.listdir(tmp_path) == ["model.pt"]
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "no-such-dir" / "x", b"x")
    with pytest.raises(ValueError, match="mode"):
        with atomic_writer(path, "a"):
            pass
    assert read(path) == b"old" and os.listdir(tmp_path) == ["model.pt"]


def dead_pid():
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_write_removes_the_temporaries_dead_writers_of_this_host_left(tmp_path):
    path = tmp_path / "ckpt.pt"
    prefix = temporary_prefix(path)
    host = socket.gethostname()
    stale = [f"{prefix}{host}-{dead_pid()}-abc_12"]
    kept = [f"{prefix}{host}-{os.getpid()}-mine01",      # this process: another thread may be writing
            f"{prefix}{host}-{os.getppid()}-alive1",     # a live process
            f"{prefix}{host}-x{os.getppid()}-abc",       # not a writer's name
            f"{prefix}{host}-123-{dead_pid()}-abc",      # host "<host>-123" (another machine), pid ...
            f"{prefix}other-host-{dead_pid()}-abc_12",   # another host: its processes are not seen here
            f".other.tmp-{host}-{dead_pid()}-abc_12"]    # another file's
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"partial")
    atomic_write(path, b"new")
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["ckpt.pt"])


def test_a_long_name_gets_a_temporary_within_the_file_name_limit(tmp_path):
    path = tmp_path / ("n" * 250)
    atomic_write(path, b"x")
    atomic_write(path, b"y")
    assert read(path) == b"y" and os.listdir(tmp_path) == ["n" * 250]


# --- killed mid-write -------------------------------------------------------------------------

WRITER = """
import sys
from tensorcom.atomic import atomic_write
path, contents = sys.argv[1], [open(name, "rb").read() for name in sys.argv[2:4]]
atomic_write(path, contents[0])  # this write removed any temporary a killed writer left
print("ready", flush=True)
i = 0
while True:
    i ^= 1
    atomic_write(path, contents[i])
"""

KILLS = 50


def test_sigkill_at_random_moments_never_leaves_a_torn_file(tmp_path):
    short = json.dumps({"contents": "short", "data": list(range(10))}).encode()
    long = json.dumps({"contents": "long", "data": list(range(30000))}).encode()
    sources = [tmp_path / "short.json", tmp_path / "long.json"]
    for source, data in zip(sources, (short, long)):
        source.write_bytes(data)
    directory = tmp_path / "out"
    directory.mkdir()
    path = directory / "state.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    rng = random.Random(1234)
    mid_write = 0
    start = time.monotonic()
    for kill in range(KILLS):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), *map(str, sources)], env=env,
                                  stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            ready, _, _ = select.select([writer.stdout], [], [], 30)
            assert ready and writer.stdout.readline() == b"ready\n", f"writer {kill} did not start"
            time.sleep(rng.uniform(0, 0.02))
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait()
            writer.stdout.close()
        data = read(path)
        assert data in (short, long), f"kill {kill}: {len(data)} bytes, neither content"
        json.loads(data)
        left = temporaries(path)
        assert len(left) <= 1, f"kill {kill}: {left}"  # the last writer's only: its predecessors' were removed
        if left:
            assert f"-{writer.pid}-" in left[0], left
            mid_write += 1
        assert sorted(os.listdir(directory)) == sorted(["state.json"] + left)
    assert mid_write > 0, "no kill landed between a temporary's creation and its rename"
    assert time.monotonic() - start < 60
