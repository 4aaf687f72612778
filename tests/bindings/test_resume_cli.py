"""python3 -m tensorcom.resume: merge (the union of token files, written
atomically) and show (a line per stream), as batch scripts use them
(examples/slurm/). Bad input is one line on stderr and exit status 2. The
command loads neither the C++ extension nor NumPy.
Environment as test_bindings.py.
"""
import json
import os
import subprocess
import sys

import pytest

import tensorcom
from tensorcom import resume_cli

FINGERPRINT = "0123456789abcdef"


def token(streams, epoch=0):
    return {"format": "tensorcom-resume", "version": 1, "epoch": epoch, "streams": streams}


def stream(complete=0, epochs=None, seed=7, fingerprint=FINGERPRINT):
    return {"fingerprint": fingerprint, "seed": seed, "complete": complete, "epochs": epochs or {}}


def write(path, value):
    with open(path, "w") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))
    return str(path)


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr

    def __repr__(self):
        return f"Result({self.returncode}, {self.stdout!r}, {self.stderr!r})"


def run_module(*args):
    """The command as a batch script runs it, in a fresh interpreter (with this one's module path)."""
    return subprocess.run([sys.executable, "-m", "tensorcom.resume", *map(str, args)], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))


@pytest.fixture
def command(capsys):
    """The command's main() in this process (quicker than an interpreter each)."""
    def run(*args):
        capsys.readouterr()
        code = resume_cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(code, out, err)
    return run


RANK0 = token({"0/2": stream(epochs={"1": {"consumed": [[0, 3], [5, 6]], "batches": 12}}, complete=1)}, 1)
RANK1 = token({"1/2": stream(epochs={"1": {"consumed": [[0, 4]], "batches": 12}}, complete=1)}, 1)


def test_merge_writes_the_union(tmp_path):
    inputs = [write(tmp_path / "rank0.json", RANK0), write(tmp_path / "rank1.json", RANK1)]
    out = tmp_path / "data.json"
    r = run_module("merge", out, *inputs)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout == f"python3 -m tensorcom.resume merge: 2 token files -> {out}: 2 streams, " \
                       "lowest incomplete epoch 1\n"
    with open(out) as f:
        assert json.load(f) == tensorcom.merge_state_dicts([RANK0, RANK1])
    assert sorted(os.listdir(tmp_path)) == ["data.json", "rank0.json", "rank1.json"]  # no temporary file


def test_merge_joins_ranges_of_a_shared_stream_and_may_overwrite_an_input(tmp_path, command):
    a = token({"s": stream(epochs={"0": {"consumed": [[0, 2]], "batches": 4}})})
    b = token({"s": stream(epochs={"0": {"consumed": [[2, 4]], "batches": 4}})})
    path_a = write(tmp_path / "a.json", a)
    r = command("merge", path_a, path_a, write(tmp_path / "b.json", b))
    assert r.returncode == 0, r.stderr
    with open(path_a) as f:
        merged = json.load(f)
    assert merged["streams"]["s"]["complete"] == 1 and merged["epoch"] == 1  # epoch 0 whole: folded


def test_show_prints_a_line_per_stream(tmp_path, command):
    path = write(tmp_path / "t.json", tensorcom.merge_state_dicts([RANK0, RANK1]))
    r = run_module("show", path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"0/2: seed 7, fingerprint {FINGERPRINT}, epochs below 1 complete; epoch 1: 4 of 12 batches consumed "
        "(0-2 5)",
        f"1/2: seed 7, fingerprint {FINGERPRINT}, epochs below 1 complete; epoch 1: 4 of 12 batches consumed (0-3)"]
    r = command("show", write(tmp_path / "empty.json", token({})))
    assert (r.returncode, r.stdout) == (0, "")
    new = token({"x": stream(epochs={"0": {"consumed": [], "batches": None}})})
    r = command("show", write(tmp_path / "new.json", new))
    assert r.stdout == f"x: seed 7, fingerprint {FINGERPRINT}, no epoch complete; epoch 0: 0 of ? batches " \
                       "consumed\n"


@pytest.mark.parametrize("content, message", [
    (None, "cannot read: No such file or directory"),
    ("{not json", "not JSON: "),
    (token({"s": stream(seed=-1)}), "streams['s'].seed: expected a whole number"),
    ({"format": "other"}, "resume token 'format': expected 'tensorcom-resume'"),
])
def test_bad_input_is_one_line_and_status_2(tmp_path, command, content, message):
    path = tmp_path / "bad.json" if content is None else write(tmp_path / "bad.json", content)
    good = write(tmp_path / "good.json", RANK0)
    for args in (["merge", tmp_path / "out.json", good, path], ["show", path]):
        r = command(*args)
        assert r.returncode == 2 and r.stdout == "", r
        assert r.stderr.count("\n") == 1 and f"{path}: {message}" in r.stderr, r.stderr
        assert r.stderr.startswith(f"python3 -m tensorcom.resume {args[0]}: error: "), r.stderr
    assert not os.path.exists(tmp_path / "out.json")


def test_a_fifo_or_a_folder_is_refused_at_once(tmp_path):
    """Not a regular file: refused without reading, so a FIFO with no
    writer cannot hold the command (run in its own interpreter, bounded)."""
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        r = run_module("show", path)
        assert r.returncode == 2 and r.stdout == "", r
        assert f"{path}: not a regular file" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_control_characters_of_a_stream_name_are_escaped(tmp_path, command):
    hostile = "rank\x1b[2J\x9b0\n"
    r = command("show", write(tmp_path / "t.json", token({hostile: stream()})))
    assert r.returncode == 0, r
    assert r.stdout.startswith("rank\\x1b[2J\\x9b0\\x0a: seed 7"), r.stdout
    assert "\x1b" not in r.stdout and "\x9b" not in r.stdout and r.stdout.count("\n") == 1
    bad = token({hostile: stream(seed=-1)})
    r = command("show", write(tmp_path / "bad.json", bad))
    assert r.returncode == 2 and "\x1b" not in r.stderr and r.stderr.count("\n") == 1, r


def test_tokens_that_disagree_are_not_merged(tmp_path, command):
    other_seed = token({"0/2": stream(seed=8)})
    inputs = [write(tmp_path / "a.json", RANK0), write(tmp_path / "b.json", other_seed)]
    r = command("merge", tmp_path / "out.json", *inputs)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "stream '0/2': token 1 has seed 8, an earlier token 7" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "out.json")


def test_an_unwritable_output_is_one_line(tmp_path, command):
    r = command("merge", tmp_path / "no-such-dir" / "out.json", write(tmp_path / "a.json", RANK0))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot write" in r.stderr, r.stderr


def imports_of(*args, pythonpath=None):
    """The command run as batch scripts run it, with -X importtime: (result, names of the modules imported)."""
    path = pythonpath or os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "tensorcom.resume", *map(str, args)],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, PYTHONPATH=path))
    lines = [line for line in r.stderr.splitlines() if line.startswith("import time:")]
    modules = {line.rsplit("|", 1)[1].strip() for line in lines}
    stderr = "\n".join(line for line in r.stderr.splitlines() if not line.startswith("import time:"))
    return Result(r.returncode, r.stdout, stderr), modules


@pytest.mark.parametrize("args", [["--help"], ["show", "TOKEN"], ["show", "BAD"], ["merge", "OUT", "TOKEN", "TOKEN"]])
def test_the_command_does_not_load_the_extension(tmp_path, args):
    files = {"TOKEN": write(tmp_path / "t.json", RANK0), "BAD": write(tmp_path / "bad.json", {"format": "other"}),
             "OUT": tmp_path / "out.json"}
    r, modules = imports_of(*[files.get(a, a) for a in args])
    assert r.returncode == (2 if "BAD" in args else 0), r
    assert "tensorcom.resume_cli" in modules, modules  # the command's own imports are seen
    assert "tensorcom._tensorcom" not in modules and "numpy" not in modules, sorted(modules)


def test_the_command_runs_where_the_extension_cannot_load(tmp_path):
    package = tmp_path / "lib" / "tensorcom"
    package.mkdir(parents=True)
    source = os.path.dirname(tensorcom.__file__)
    for name in os.listdir(source):
        if name.endswith(".py"):
            with open(os.path.join(source, name), "rb") as f, open(package / name, "wb") as g:
                g.write(f.read())
    with open(package / "_tensorcom.py", "w") as f:
        f.write("raise ImportError('the extension cannot load here')\n")
    inputs = [write(tmp_path / "rank0.json", RANK0), write(tmp_path / "rank1.json", RANK1)]
    r, _ = imports_of("merge", tmp_path / "out.json", *inputs, pythonpath=str(tmp_path / "lib"))
    assert r.returncode == 0 and r.stderr == "", r
    r, _ = imports_of("show", tmp_path / "out.json", pythonpath=str(tmp_path / "lib"))
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 2, r
    r, _ = imports_of("show", write(tmp_path / "bad.json", token({"s": stream(seed=-1)})),
                      pythonpath=str(tmp_path / "lib"))
    assert r.returncode == 2 and "streams['s'].seed: expected a whole number" in r.stderr, r
    # The package itself still imports there; only what needs the extension fails.
    code = "import tensorcom, tensorcom.atomic\ntry:\n    tensorcom.Connection\nexcept ImportError as e:\n    print(e)"
    check = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=str(tmp_path / "lib")))
    assert check.stdout.strip() == "the extension cannot load here", check
