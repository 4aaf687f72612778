"""A mutation fuzz loop for tensorcom.tenbin.read (the stream reader, and the
C++ decoder under it): random mutations of valid .ten files must come out as
arrays or as the project's errors (tensorcom.Error), nothing else.

Debian has no Python fuzzing package (atheris), so this is a plain loop:
seeded, bounded in inputs and in time, run by meson test with the bindings
tests. TENSORCOM_PY_FUZZ_RUNS, TENSORCOM_PY_FUZZ_SECONDS and
TENSORCOM_PY_FUZZ_SEED change how many inputs, for how long at most, and
which; a failure names the seed and input number to replay.
"""

import io
import os
import random
import struct
import time

import numpy as np

import tensorcom
from tensorcom import tenbin

RUNS = int(os.environ.get("TENSORCOM_PY_FUZZ_RUNS", "20000"))
SEED = int(os.environ.get("TENSORCOM_PY_FUZZ_SEED", "12"))
TIME_LIMIT_S = float(os.environ.get("TENSORCOM_PY_FUZZ_SECONDS", "60"))
GOLDEN_DIR = os.environ.get("TENSORCOM_GOLDEN_DIR", "")

# Values that break length, ndim and dimension fields.
INTERESTING_I64 = [0, 1, -1, 7, 8, 63, 64, 65, 2**31 - 1, 2**32, 2**62, 2**63 - 1, -(2**63)]


def seeds():
    """Valid .ten encodings: built here, and the golden files when present."""
    rng = np.random.default_rng(0)
    lists = [
        [rng.integers(0, 256, (2, 4, 4, 3), dtype=np.uint8), np.array([3, 1], np.int32)],
        [np.arange(6, dtype=np.float32).reshape(2, 3)],
        [np.array(7, np.int64), np.zeros((0, 5), np.float16), np.arange(3, dtype=np.uint32)],
    ]
    out = [bytes(tenbin.encode_buffer(l)) for l in lists]
    out.append(b"".join(out[:2]))
    out.append(bytes(tenbin.encode_buffer(lists[0], infos=["img", "cls"])))
    if GOLDEN_DIR and os.path.isdir(GOLDEN_DIR):
        for name in sorted(os.listdir(GOLDEN_DIR)):
            if name.endswith(".ten"):
                with open(os.path.join(GOLDEN_DIR, name), "rb") as f:
                    data = f.read()
                if len(data) <= 1 << 16:
                    out.append(data)
    return out


def mutate(data, pool, rng):
    """data with one to four random edits."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(7)
        if kind == 0 and b:  # flip a bit
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif kind == 1 and b:  # set a byte
            b[rng.randrange(len(b))] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif kind == 2 and len(b) >= 8:  # an int64 field (lengths, ndim, dims sit at multiples of 8)
            i = rng.randrange(len(b) // 8) * 8
            b[i:i + 8] = struct.pack("<q", rng.choice(INTERESTING_I64))
        elif kind == 3:  # cut
            del b[rng.randrange(len(b) + 1):]
        elif kind == 4 and b:  # delete or duplicate a range
            i = rng.randrange(len(b))
            j = min(len(b), i + rng.randint(1, 128))
            if rng.random() < 0.5:
                del b[i:j]
            else:
                b[i:i] = b[i:j]
        elif kind == 5:  # splice another seed in
            other = rng.choice(pool)
            i = rng.randrange(len(b) + 1)
            b[i:] = other[rng.randrange(len(other) + 1):]
        else:  # insert random bytes
            i = rng.randrange(len(b) + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(b)


def test_read_raises_only_tensorcom_errors():
    rng = random.Random(SEED)
    pool = seeds()
    deadline = time.monotonic() + TIME_LIMIT_S
    decoded = refused = 0
    for run in range(RUNS):
        if time.monotonic() > deadline:
            break
        data = mutate(rng.choice(pool), pool, rng)
        n = rng.choice([1, 2, 3, 999999])
        try:
            arrays, infos = tenbin.read(io.BytesIO(data), n=n, infos=True)
        except tensorcom.Error:
            refused += 1
            continue
        except Exception as e:  # noqa: BLE001: the point of the test
            raise AssertionError(f"seed {SEED} input {run} ({len(data)} bytes, n={n}): "
                                 f"{type(e).__name__}: {e}; input: {data[:256]!r}") from e
        decoded += 1
        # What was read encodes back and decodes to the same arrays.
        again, again_infos = tenbin.decode_buffer(tenbin.encode_buffer(arrays, infos=infos), infos=True)
        assert again_infos == infos
        assert all(a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
                   for a, b in zip(again, arrays))
    # Both outcomes must have been reached, or the mutations are off.
    print(f"{decoded} decoded, {refused} refused")
    assert decoded > 0 and refused > 0, (decoded, refused)


def test_read_a_chunk_claiming_more_than_memory():
    """A length field of 2**63 - 1 or 2**40 is refused without allocating it."""
    good = bytearray(tenbin.encode_buffer([np.arange(6, dtype=np.int32)]))
    for claim in (2**63 - 1, 2**40):
        bad = bytearray(good)
        bad[8:16] = struct.pack("<q", claim)
        try:
            tenbin.read(io.BytesIO(bytes(bad)))
        except tensorcom.FormatError as e:
            assert "cut short" in str(e)
        else:
            raise AssertionError(f"a chunk claiming {claim} bytes was accepted")


def test_read_an_empty_array_whose_other_dims_overflow():
    """Found by the loop above: shape (0, 2**62) of float16 holds no bytes, but
    numpy cannot make it; the decoder refuses it as the shape overflowing."""
    good = bytearray(tenbin.encode_buffer([np.zeros((1, 1), np.float16)]))
    good[40:56] = struct.pack("<qq", 0, 2**62)  # the two dims of the header
    try:
        tenbin.read(io.BytesIO(bytes(good)))
    except tensorcom.FormatError as e:
        assert "overflows 64 bits" in str(e)
    else:
        raise AssertionError("accepted")
