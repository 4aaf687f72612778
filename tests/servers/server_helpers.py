"""Helpers for the image servers' tests (test_image_servers_*.py): images and webdataset shards made with
cv2 and tarfile, and a runner that starts an image server, receives every
batch it sends on a Python PULL socket, and parses its summary line.

Only Debian's python3 packages are used (numpy, zmq, cv2, msgpack).
"""

import io
import os
import re
import signal
import subprocess
import sys
import tarfile
import time

import cv2
import msgpack
import numpy as np
import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tenbin_ref as tb  # noqa: E402
from receipts_source import Receipts  # noqa: E402

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
SHARDS_EXE = os.path.join(BUILD_DIR, "servers", "serve-imagenet-shards")
DIR_EXE = os.path.join(BUILD_DIR, "servers", "serve-imagenet-dir")

MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])

RECV_POLL_MS = 200      # one poll of the PULL socket
RUN_DEADLINE_S = 60     # one whole server run
DRAIN_AFTER_EXIT_S = 0.5


# --- images ----------------------------------------------------------------------

def smooth_image(rng, height, width, channels=3):
    """A smooth random RGB (or grey) uint8 image: random colour gradients
    plus a few blobs, so that JPEG keeps it close and crops differ."""
    y = np.linspace(0, 1, height)[:, None]
    x = np.linspace(0, 1, width)[None, :]
    planes = []
    for _ in range(channels):
        a, b, c = rng.uniform(-1, 1, 3)
        p = 128 + 100 * (a * x + b * y) + 40 * np.sin(6.28 * (c * x + rng.uniform() * y + rng.uniform()))
        planes.append(p)
    img = np.stack(planes, axis=-1) if channels > 1 else planes[0]
    return np.clip(img, 0, 255).astype(np.uint8)


def encode(image_rgb, ext, **kw):
    """Encodes an RGB (or grey, or RGBA) uint8/uint16 image; cv2 wants BGR."""
    img = image_rgb
    if img.ndim == 3 and img.shape[2] == 3:
        img = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
    elif img.ndim == 3 and img.shape[2] == 4:
        img = cv2.cvtColor(img, cv2.COLOR_RGBA2BGRA)
    params = []
    if ext in ("jpg", "jpeg"):
        params = [cv2.IMWRITE_JPEG_QUALITY, kw.get("quality", 92)]
        if kw.get("progressive"):
            params += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    ok, buf = cv2.imencode("." + ext, img, params)
    assert ok, ext
    return buf.tobytes()


# --- shards ----------------------------------------------------------------------

def write_tar(path, samples):
    """samples: list of (key, {ext: bytes}) in order; members in dict order."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for key, members in samples:
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                info.mtime = 1700000000
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
    return path


def member_offsets(path):
    """{member name: (offset of its data, size)} of a tar file."""
    with tarfile.open(path, "r") as tar:
        return {m.name: (m.offset_data, m.size) for m in tar.getmembers()}


def cls(label):
    return str(label).encode()


# --- running a server ------------------------------------------------------------

class Run:
    """The outcome of one server run: return code, stdout, stderr, and the
    batches as lists of numpy arrays (plus decoded metadata, if sent)."""

    def __init__(self, rc, out, err, batches, infos):
        self.rc = rc
        self.out = out
        self.err = err
        self.batches = batches
        self.infos = infos

    @property
    def images(self):
        return [b[0] for b in self.batches]

    @property
    def labels(self):
        return [b[1] for b in self.batches]

    @property
    def metas(self):
        out = []
        for batch, infos in zip(self.batches, self.infos):
            # images, labels, MixUp/CutMix's draws if mixed, metadata
            assert len(batch) in (3, 4) and infos[-1] == "meta" and infos[2:-1] in ([], ["mix"]), infos
            out.append(msgpack.unpackb(batch[-1].tobytes(), raw=False))
        return out

    def keys(self):
        """All keys served, in order."""
        return [k for m in self.metas for k in m["keys"]]

    def samples(self):
        """[(key, label, image)] in the order served (needs --meta)."""
        out = []
        for batch, meta in zip(self.batches, self.metas):
            assert len(meta["keys"]) == batch[0].shape[0] == batch[1].shape[0], (meta, batch[0].shape)
            for i, key in enumerate(meta["keys"]):
                out.append((key, int(batch[1][i]), batch[0][i]))
        return out

    def all_images(self):
        return np.concatenate(self.images) if self.batches else np.zeros((0,))

    def summary(self):
        """(served, batches, {reason: count}, shard errors) from the 'done:' line."""
        m = re.search(r": done: served (\d+) samples in (\d+) batches in [^;]*; skipped: (.*); shard errors: (\d+)",
                      self.out)
        assert m, f"no summary line in stdout:\n{self.out}\nstderr:\n{self.err}"
        skipped = {}
        if m.group(3) != "none":
            for item in m.group(3).split(", "):
                reason, count = item.rsplit(" ", 1)
                skipped[reason] = int(count)
        return int(m.group(1)), int(m.group(2)), skipped, int(m.group(4))

    def replaced(self):
        """{reason: count} of the samples replaced by a neighbour, from the 'done:' line."""
        m = re.search(r"; replaced by a neighbour: (\d+)(?: \(([^)]*)\))?", self.out)
        assert m, f"no replacement count in stdout:\n{self.out}"
        replaced = {}
        for item in (m.group(2) or "").split(", ") if m.group(2) else []:
            reason, count = item.rsplit(" ", 1)
            replaced[reason] = int(count)
        assert sum(replaced.values()) == int(m.group(1)), m.group(0)
        return replaced

    def unfilled(self):
        """Skipped samples that no neighbour could replace, from the 'done:' line."""
        m = re.search(r"; replaced by a neighbour: [^;]*?, not replaceable (\d+)", self.out)
        return int(m.group(1)) if m else 0

    def assert_replaced(self, good, every=True):
        """Every good key served, each skipped sample replaced by a good
        neighbour (every=False: or counted as not replaceable, when no good
        one is near): none but the good keys, one sample for each replaced."""
        skipped, replaced = self.summary()[2], self.replaced()
        if every:
            assert replaced == skipped and self.unfilled() == 0, (replaced, skipped, self.unfilled())
        assert sum(replaced.values()) + self.unfilled() == sum(skipped.values()), (replaced, skipped)
        assert set(self.keys()) == set(good), self
        assert len(self.keys()) == len(good) + sum(replaced.values()), self

    def __repr__(self):
        return f"Run(rc={self.rc}, {len(self.batches)} batches)\nstdout:\n{self.out}\nstderr:\n{self.err}"


def _batches_in_summary(out_path):
    with open(out_path, encoding="utf-8", errors="replace") as f:
        m = re.search(r": done: served \d+ samples in (\d+) batches", f.read())
    return int(m.group(1)) if m else None


def confirm(receipts, arrays, infos):
    """Sends the receipt a batch's metadata asks for (over ipc); False for a
    copy of a batch taken before."""
    if not infos or infos[-1] != "meta":
        return True
    return receipts.take(msgpack.unpackb(arrays[-1].tobytes(), raw=False))


def close_server(proc, pull, ctx):
    """Kills the server if it still runs, then closes the test's socket and context."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
    pull.close(linger=0)
    ctx.term()


def run_server(args, tmpdir, exe=SHARDS_EXE, deadline_s=RUN_DEADLINE_S, receive=True, preexec_fn=None, cwd=None,
               stop_after=None):
    """Runs exe with args plus a zpush+ipc address whose PULL end is bound
    here first; receives until the server has exited and nothing more comes.
    stop_after: send SIGTERM once that many batches came (for servers that
    serve until stopped). Returns a Run. The process is killed if it
    outlives the deadline."""
    sock_path = os.path.join(tmpdir, "s")
    assert len(sock_path) < 100, sock_path
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    pull.setsockopt(zmq.RCVHWM, 1000)
    out_path = os.path.join(tmpdir, "stdout.txt")
    err_path = os.path.join(tmpdir, "stderr.txt")
    batches, infos = [], []
    proc = None
    try:
        pull.bind("ipc://" + sock_path)
        cmd = [exe] + list(args) + (["zpush+ipc://" + sock_path] if receive else [])
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, preexec_fn=preexec_fn,
                                    cwd=cwd)
        poller = zmq.Poller()
        poller.register(pull, zmq.POLLIN)
        receipts = Receipts(ctx)
        start = time.monotonic()
        exited_at = None
        while True:
            if time.monotonic() - start > deadline_s:
                raise AssertionError(f"server still running after {deadline_s} s: {cmd}")
            if dict(poller.poll(RECV_POLL_MS)).get(pull):
                frames = pull.recv_multipart(copy=True)
                arrays, tinfos = tb.decode_message(frames, with_infos=True)
                if not confirm(receipts, arrays, tinfos):
                    continue
                batches.append(arrays)
                infos.append(tinfos)
                if stop_after is not None and len(batches) == stop_after:
                    proc.send_signal(signal.SIGTERM)
                continue
            if exited_at is None:
                if proc.poll() is not None:
                    exited_at = time.monotonic()
                continue
            # Exited: what it sent is on its way (it lingers until delivered);
            # wait for as many batches as its summary says, or a short while.
            expected = _batches_in_summary(out_path)
            waited = time.monotonic() - exited_at
            if expected is not None and len(batches) >= expected:
                break
            if waited > (DRAIN_AFTER_EXIT_S * 3 if expected is not None else DRAIN_AFTER_EXIT_S):
                break
        rc = proc.returncode
        receipts.close()
    finally:
        close_server(proc, pull, ctx)
    with open(out_path, encoding="utf-8", errors="replace") as f:
        out = f.read()
    with open(err_path, encoding="utf-8", errors="replace") as f:
        err = f.read()
    return Run(rc, out, err, batches, infos)


def run_plain(args, exe=SHARDS_EXE, timeout=30, cwd=None):
    """Runs exe without receiving (for argument errors); returns (rc, out, err)."""
    proc = subprocess.run([exe] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, cwd=cwd)
    return proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")


def normalise(images_bhwc_u8):
    """(x/255 - mean)/std in float64, BHWC."""
    return (images_bhwc_u8.astype(np.float64) / 255.0 - MEAN) / STD
