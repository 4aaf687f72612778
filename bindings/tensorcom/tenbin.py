"""The tenbin format, with the reference's functions (tensorcom.tenbin and
webdataset.tenbin), byte-compatible with it, done by the C++ codec.

Decoded arrays are views of their input: a buffer, the frames, or a private
(copy-on-write) mapping of a .ten file; the input lives as long as they do.
Inputs are checked as the C++ decoders check them: a malformed one raises
tensorcom.FormatError (a ValueError) naming the field and its byte offset.

`infos` arguments follow the reference: on encoding, a list of info strings
(one per array, at most 8 ASCII characters); on decoding, False (arrays
only), True (arrays, infos), or a list the infos must equal.
"""

import os
import struct

import numpy as np

from . import _tensorcom as _c
from ._tensorcom import ArgumentError, FormatError

magic_bytes = b"~TenBin~"


def roundup(n, k=64):
    """n rounded up to a multiple of k."""
    return k * ((n + k - 1) // k)


def check_infos(data, infos, required_infos=None):
    """The reference's infos logic: data, (data, infos), or a check."""
    if required_infos is None or required_infos is False:
        return data
    if required_infos is True:
        return data, infos
    if list(required_infos) != list(infos):
        raise FormatError(f"infos {list(infos)} differ from the required {list(required_infos)}")
    return data


def as_list(l):
    """l as a list of arrays; one array is refused (not split into rows) by the C++ side."""
    return l if isinstance(l, (list, tuple, np.ndarray)) else list(l)


def _infos_for(arrays, infos):
    if infos is None:
        return [""] * len(arrays)
    if len(infos) != len(arrays):
        raise ArgumentError(f"{len(infos)} infos for {len(arrays)} arrays")
    return list(infos)


def encode_header(a, info=""):
    """The header payload of one array: int64 words dtype code, info, ndim, dims."""
    return _c.encode_header(a, info)


def encode_buffer(l, infos=None):
    """The single-buffer encoding of a list of arrays, as a bytearray."""
    return _c.encode_buffer(as_list(l), infos)


def decode_buffer(buf, infos=False):
    """The arrays of a single buffer (bytes, bytearray, memoryview, numpy array...)."""
    arrays, got = _c.decode_buffer(buf)
    return check_infos(arrays, got, infos)


def encode_list(l, infos=None):
    """[header, data, header, data, ...]: the frames of a multipart message.

    Headers are bytes; data frames are memoryviews of the arrays (no copy when
    an array is C-contiguous and little-endian)."""
    l = as_list(l)
    if isinstance(l, np.ndarray):
        raise ArgumentError("expected a list of arrays, got one array")
    frames = []
    for a, info in zip(l, _infos_for(l, infos)):
        wire = _c.wire_array(a)
        frames += [_c.encode_header(wire, info), memoryview(wire.reshape(-1).view(np.uint8))]
    return frames


def decode_list(l, infos=False):
    """The arrays of a multipart message's frames (any buffer objects, zmq.Frame too)."""
    arrays, got = _c.decode_frames(list(l))
    return check_infos(arrays, got, infos)


def write(stream, l, infos=None):
    """Writes a list of arrays to a binary stream, in the single-buffer encoding."""
    stream.write(encode_buffer(l, infos=infos))


# Chunk bodies are read this much at a time, so that memory follows the bytes
# a stream holds, not the length its chunk prefix claims (a stream from
# elsewhere may claim 2**62 bytes).
_READ_PIECE = 1 << 20


def _read_up_to(stream, n):
    """Up to n bytes of stream (fewer only at its end), read in pieces."""
    out = bytearray()
    while len(out) < n:
        piece = stream.read(min(n - len(out), _READ_PIECE))
        if not piece:
            break
        out += piece
    return out


def _read_chunk(stream, offset):
    """prefix + payload + padding of the next chunk, or None at the end."""
    prefix = _read_up_to(stream, 16)
    if not prefix:
        return None
    if len(prefix) < 16 or prefix[:8] != magic_bytes:
        raise FormatError(f"bad chunk prefix {bytes(prefix[:16])!r} (at byte {offset})")
    (nbytes,) = struct.unpack("<q", prefix[8:16])
    if nbytes < 0:
        raise FormatError(f"chunk length {nbytes} is negative (at byte {offset + 8})")
    body = _read_up_to(stream, roundup(nbytes))
    if len(body) < nbytes:
        raise FormatError(f"chunk of {nbytes} bytes cut short after {len(body)} (at byte {offset + 16})")
    return prefix + body


def read(stream, n=999999, infos=False):
    """Reads up to n arrays (header and data chunks) from a binary stream."""
    buf = bytearray()
    for _ in range(n):
        header = _read_chunk(stream, len(buf))
        if header is None:
            break
        buf += header
        data = _read_chunk(stream, len(buf))
        if data is None:
            raise FormatError(f"a header chunk without its data chunk (at byte {len(buf)})")
        buf += data
    return decode_buffer(buf, infos=infos)


def _check_name(fname, nocheck):
    if not nocheck and not os.fspath(fname).endswith(".ten"):
        raise ArgumentError(f"{os.fspath(fname)!r} does not end in .ten (pass nocheck=True to allow it)")


def save(fname, *args, infos=None, nocheck=False):
    """Writes the arrays given as arguments to a .ten file."""
    _check_name(fname, nocheck)
    _c.write_ten(os.fspath(fname), list(args), infos)


def load(fname, infos=False, nocheck=False):
    """Every array of a .ten file (several lists back to back come as one list)."""
    _check_name(fname, nocheck)
    arrays, got = _c.read_ten(os.fspath(fname))
    return check_infos(arrays, got, infos)


def load_lists(fname, tensors_per_list=0, infos=False):
    """The lists of a .ten file of lists back to back (as `tenbin record` writes),
    split every tensors_per_list arrays (0: inferred from the arrays' signatures)."""
    return [check_infos(arrays, got, infos) for arrays, got in _c.read_ten_lists(os.fspath(fname), tensors_per_list)]
