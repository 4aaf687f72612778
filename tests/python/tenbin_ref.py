"""An independent tenbin implementation, written from shared/tenbin/FORMAT.md.

It is deliberately small and shares no code with the C++ library: the interop
tests use it as the reference peer.  Differences from NVlabs' Python code, all
allowed by FORMAT.md: `u4` works, 0-d arrays decode, 64-bit dtypes need no
opt-in.

A "list" is a Python list of numpy arrays; infos travel beside it as a list of
str (empty by default).
"""

import struct

import numpy as np

MAGIC = b"~TenBin~"
ALIGN = 64
MAX_NDIM = 9  # the reference asserts ndim < 10

# dtype code -> numpy dtype, little-endian.
CODES = {c: np.dtype("<" + c) for c in
         ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8")}


class FormatError(ValueError):
    pass


def _word(text, what):
    raw = text.encode("ascii") if isinstance(text, str) else bytes(text)
    if len(raw) > 8:
        raise FormatError(f"{what} {raw!r} is longer than 8 bytes")
    return raw.ljust(8, b"\0")


def _unword(raw):
    return raw.strip(b"\0").decode("ascii")


def dtype_code(dtype):
    dt = np.dtype(dtype)
    code = dt.kind + str(dt.itemsize)
    if code not in CODES:
        raise FormatError(f"dtype {dt} has no tenbin code")
    return code


def _as_wire_array(a):
    """C-contiguous, little-endian copy/view of a."""
    a = np.asarray(a)
    code = dtype_code(a.dtype)
    return np.ascontiguousarray(a, dtype=CODES[code])


# --- one tensor: header + data ---------------------------------------------

def encode_header(a, info=""):
    a = np.asarray(a)
    if a.ndim > MAX_NDIM:
        raise FormatError(f"ndim {a.ndim} > {MAX_NDIM}")
    words = _word(dtype_code(a.dtype), "dtype code") + _word(info, "info")
    return words + struct.pack("<%dq" % (1 + a.ndim), a.ndim, *a.shape)


def decode_header(h):
    """-> (numpy dtype, shape tuple, info str)."""
    h = bytes(h)
    if len(h) < 24:
        raise FormatError(f"header of {len(h)} bytes < 24")
    code = _unword(h[0:8])
    if code not in CODES:
        raise FormatError(f"unknown dtype code {h[0:8]!r}")
    info = _unword(h[8:16])
    (ndim,) = struct.unpack("<q", h[16:24])
    if not 0 <= ndim <= MAX_NDIM:
        raise FormatError(f"ndim {ndim}")
    if len(h) < 24 + 8 * ndim:
        raise FormatError(f"header of {len(h)} bytes too short for ndim {ndim}")
    shape = struct.unpack("<%dq" % ndim, h[24:24 + 8 * ndim])
    if any(d < 0 for d in shape):
        raise FormatError(f"negative dimension in {shape}")
    return CODES[code], tuple(shape), info


def encode_data(a):
    return _as_wire_array(a).tobytes()


def decode_data(dtype, shape, data):
    n = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if len(data) < n:
        raise FormatError(f"data of {len(data)} bytes < {n}")
    return np.frombuffer(bytes(data[:n]), dtype=dtype).reshape(shape).copy()


def _infos(arrays, infos):
    if infos is None:
        return [""] * len(arrays)
    if len(infos) != len(arrays):
        raise FormatError("infos and arrays differ in length")
    return list(infos)


# --- multipart frames --------------------------------------------------------

def encode_frames(arrays, infos=None):
    """[hdr0, data0, hdr1, data1, ...], no magic, length or padding."""
    frames = []
    for a, info in zip(arrays, _infos(arrays, infos)):
        frames.append(encode_header(a, info))
        frames.append(encode_data(a))
    return frames


def decode_frames(frames, with_infos=False):
    frames = [bytes(f) for f in frames]
    if len(frames) % 2:
        raise FormatError(f"odd number of frames ({len(frames)})")
    arrays, infos = [], []
    for i in range(0, len(frames), 2):
        dtype, shape, info = decode_header(frames[i])
        arrays.append(decode_data(dtype, shape, frames[i + 1]))
        infos.append(info)
    return (arrays, infos) if with_infos else arrays


# --- single buffer (.ten files, one-frame messages) ------------------------

def _pad(n):
    return (-n) % ALIGN


def encode_chunks(chunks):
    out = bytearray()
    for c in chunks:
        out += MAGIC + struct.pack("<q", len(c)) + c + b"\0" * _pad(len(c))
    return bytes(out)


def decode_chunks(buf):
    buf = bytes(buf)
    chunks, pos = [], 0
    while pos < len(buf):
        if len(buf) - pos < 16:
            raise FormatError(f"{len(buf) - pos} trailing bytes at {pos}")
        if buf[pos:pos + 8] != MAGIC:
            raise FormatError(f"bad magic {buf[pos:pos + 8]!r} at {pos}")
        (n,) = struct.unpack("<q", buf[pos + 8:pos + 16])
        pos += 16
        if n < 0 or n > len(buf) - pos:
            raise FormatError(f"chunk length {n} at {pos - 8}")
        chunks.append(buf[pos:pos + n])
        pos += n + _pad(n)
    if pos != len(buf):
        raise FormatError("padding runs past the end")
    return chunks


def encode_buffer(arrays, infos=None):
    return encode_chunks(encode_frames(arrays, infos))


def decode_buffer(buf, with_infos=False):
    return decode_frames(decode_chunks(buf), with_infos)


def is_single(frames):
    return len(frames) == 1 and bytes(frames[0][:8]) == MAGIC


def decode_message(frames, with_infos=False):
    """A ZeroMQ message in either encoding."""
    if is_single(frames):
        return decode_buffer(frames[0], with_infos)
    return decode_frames(frames, with_infos)


# --- golden.json's generator --------------------------------------------------

def golden_values(dtype, shape):
    """values[k] = ((7*k + 3) mod 251) - 100 over the flattened array, |.| for
    unsigned dtypes, /8.0 for floats, then cast to the dtype."""
    dt = np.dtype(dtype)
    shape = tuple(shape)
    k = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    v = (7 * k + 3) % 251 - 100
    if dt.kind == "u":
        v = np.abs(v)
    if dt.kind == "f":
        v = v / 8.0
    return v.astype(dt).reshape(shape)


def same_list(a, b, infos_a=None, infos_b=None):
    """Exact equality of two lists: dtype, shape, values (bitwise) and infos."""
    if len(a) != len(b):
        return False
    if infos_a is not None and infos_b is not None and list(infos_a) != list(infos_b):
        return False
    for x, y in zip(a, b):
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if _as_wire_array(x).tobytes() != _as_wire_array(y).tobytes():
            return False
    return True
