"""The tenbin format, with the reference's functions (tensorcom.tenbin and
webdataset.tenbin), byte-compatible with it, done by the C++ codec.

Decoded arrays are views of their input: a buffer, the frames, or a private
(copy-on-write) mapping of a .ten file; the input lives as long as they do.
Inputs are checked as the C++ decoders check them: a malformed one raises
tensorcom.FormatError (a ValueError) naming the field and its byte offset,
where the reference raises AssertionError or decodes garbage.

`infos` arguments follow the reference: on encoding, a list of info strings
(one per array, at most 8 ASCII characters); on decoding, False (arrays
only), True (arrays, infos), or a list the infos must equal.

The z* functions take a pyzmq socket, as the reference's, or the `socket`
of a tensorcom.Connection (then the C++ connection does the work).
"""

from __future__ import annotations

import os
import struct
from typing import Any, BinaryIO, List, Optional, Sequence, Union

import numpy as np

from . import _tensorcom as _c
from ._tensorcom import ArgumentError, FormatError

# The dtypes tenbin has codes for, by name and by code ("f4": numpy's own
# short form, as the reference's long_to_short table).
long_to_short = {name: np.dtype(name).str[1:] for name in (
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}
short_to_long = {code: name for name, code in long_to_short.items()}

_64BIT = ("float64", "int64", "uint64")

# A list of arrays; infos given to encode (one string an array); infos asked
# of a decode (False, True, or the list they must equal); a file name.
Arrays = Sequence[Any]
EncodeInfos = Optional[Sequence[str]]
DecodeInfos = Union[bool, Sequence[str], None]
Path = Union[str, "os.PathLike[str]"]


def bytelen(a: Any) -> int:
    """The length of a in bytes (arrays, bytes, bytearray, memoryview)."""
    if hasattr(a, "nbytes"):
        return a.nbytes
    if isinstance(a, (bytes, bytearray)):
        return len(a)
    raise ValueError(a, "cannot determine nbytes")


def bytedata(a: Any) -> Any:
    """The raw data of a: itself for bytes-like objects, a.data for arrays."""
    if isinstance(a, (bytes, bytearray, memoryview)):
        return a
    if hasattr(a, "data"):
        return a.data
    raise ValueError(a, "cannot return bytedata")


def _dtype_name(a):
    return str(getattr(a, "dtype", type(a).__name__)).removeprefix("torch.")  # numpy or torch


def check_acceptable_input_type(data: Arrays, allow64: bool) -> None:
    """Raises ArgumentError unless every array has a tenbin dtype, and (unless
    allow64) none is float64, int64 or uint64."""
    for i, a in enumerate(data):
        name = _dtype_name(a)
        if name not in long_to_short:
            raise ArgumentError(f"array {i} is {name}, which tenbin has no code for")
        if not allow64 and name in _64BIT:
            raise ArgumentError(f"array {i} is {name}: 64-bit arrays are sent only with allow64=True "
                                "(on the Connection or the send)")


def str64(s: str) -> int:
    """The int64 whose 8 little-endian bytes are s, NUL-padded (at most 8 ASCII characters)."""
    b = s.encode("ascii")
    if len(b) > 8:
        raise ArgumentError(f"{s!r} is longer than 8 characters")
    return struct.unpack("<q", b.ljust(8, b"\0"))[0]


def unstr64(i: int) -> str:
    """The string of an int64 made by str64."""
    return struct.pack("<q", int(i)).decode("ascii").strip("\0")


magic_str = "~TenBin~"
magic = str64(magic_str)
magic_bytes = magic_str.encode("ascii")


def roundup(n: int, k: int = 64) -> int:
    """n rounded up to a multiple of k."""
    return k * ((n + k - 1) // k)


def check_infos(data: Any, infos: Sequence[str], required_infos: DecodeInfos = None) -> Any:
    """The reference's infos logic: data, (data, infos), or a check of the
    infos against required_infos (as far as both go)."""
    if required_infos is None or required_infos is False:
        return data
    if required_infos is True:
        return data, infos
    for i, (required, actual) in enumerate(zip(required_infos, infos)):
        if required != actual:
            raise FormatError(f"info {i} is {actual!r}, not the required {required!r}")
    return data


def as_list(l: Any) -> Any:
    """l as a list of arrays; one array is refused (not split into rows) by the C++ side."""
    return l if isinstance(l, (list, tuple, np.ndarray)) else list(l)


def _infos_for(arrays, infos):
    if infos is None:
        return [""] * len(arrays)
    if len(infos) != len(arrays):
        raise ArgumentError(f"{len(infos)} infos for {len(arrays)} arrays")
    return list(infos)


def encode_header(a: Any, info: str = "") -> bytes:
    """The header payload of one array: int64 words dtype code, info, ndim, dims."""
    return _c.encode_header(a, info)


def decode_header(h: Any) -> Any:
    """(shape, dtype, info) of a header payload (a tuple of ints, a numpy dtype, a str)."""
    return _c.decode_header(h)


def encode_list(l: Arrays, infos: EncodeInfos = None) -> List[Any]:
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


def decode_list(l: Sequence[Any], infos: DecodeInfos = False) -> Any:
    """The arrays of a multipart message's frames (any buffer objects, zmq.Frame too)."""
    arrays, got = _c.decode_frames(list(l))
    return check_infos(arrays, got, infos)


def _bytes_view(b):
    """A flat, contiguous byte view of a buffer object."""
    view = memoryview(bytedata(b))
    if not view.c_contiguous:
        view = memoryview(view.tobytes())
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view


def encode_chunks(l: Sequence[Any]) -> bytearray:
    """One buffer holding each buffer of l as a chunk: magic, int64 length,
    the bytes, zero padding to a multiple of 64."""
    views = [_bytes_view(b) for b in l]
    result = bytearray(sum(16 + roundup(len(v)) for v in views))
    offset = 0
    for v in views:
        result[offset:offset + 16] = magic_bytes + struct.pack("<q", len(v))
        result[offset + 16:offset + 16 + len(v)] = v
        offset += 16 + roundup(len(v))
    return result


def decode_chunks(buf: Any) -> List[memoryview]:
    """The payloads of buf's chunks, as memoryviews of buf (no copy)."""
    view = _bytes_view(buf)
    return [view[offset:offset + size] for offset, size in _c.chunk_spans(view)]


def encode_buffer(l: Arrays, infos: EncodeInfos = None) -> Any:
    """The single-buffer encoding of a list of arrays, as a bytearray."""
    return _c.encode_buffer(as_list(l), infos)


def decode_buffer(buf: Any, infos: DecodeInfos = False) -> Any:
    """The arrays of a single buffer (bytes, bytearray, memoryview, numpy array...)."""
    arrays, got = _c.decode_buffer(buf)
    return check_infos(arrays, got, infos)


def write_chunk(stream: BinaryIO, buf: Any) -> None:
    """Writes one chunk (magic, length, bytes, padding) to a binary stream."""
    view = _bytes_view(buf)
    stream.write(magic_bytes + struct.pack("<q", len(view)))
    stream.write(view)
    padding = roundup(len(view)) - len(view)
    if padding > 0:
        stream.write(b"\0" * padding)


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


def _read_exactly(stream, n, what, offset):
    data = _read_up_to(stream, n)
    if len(data) < n:
        raise FormatError(f"{what} cut short: {len(data)} of {n} bytes (at byte {offset})")
    return data


def read_chunk(stream: BinaryIO) -> Optional[bytes]:
    """The payload of the next chunk of a binary stream (a bytearray), or None at its end."""
    start = stream.tell() if stream.seekable() else 0
    prefix = stream.read(16)
    if not prefix:
        return None
    if len(prefix) < 16 or prefix[:8] != magic_bytes:
        raise FormatError(f"bad chunk prefix {bytes(prefix[:16])!r} (at byte {start})")
    (nbytes,) = struct.unpack("<q", prefix[8:16])
    if nbytes < 0:
        raise FormatError(f"chunk length {nbytes} is negative (at byte {start + 8})")
    data = bytearray(_read_exactly(stream, nbytes, "chunk", start + 16))
    stream.read(roundup(nbytes) - nbytes)  # the padding, which may be missing at the very end
    return data


def write(stream: BinaryIO, l: Arrays, infos: EncodeInfos = None) -> None:
    """Writes a list of arrays to a binary stream, in the single-buffer encoding."""
    stream.write(encode_buffer(l, infos=infos))


def read(stream: BinaryIO, n: int = 999999, infos: DecodeInfos = False) -> Any:
    """Reads up to n arrays (header and data chunks) from a binary stream."""
    chunks = []
    for _ in range(n):
        header = read_chunk(stream)
        if header is None:
            break
        data = read_chunk(stream)
        if data is None:
            raise FormatError("a header chunk without its data chunk at the end of the stream")
        chunks += [header, data]
    return decode_list(chunks, infos=infos)


def _check_name(fname, nocheck):
    if not nocheck and not os.fspath(fname).endswith(".ten"):
        raise ArgumentError(f"{os.fspath(fname)!r} does not end in .ten (pass nocheck=True to allow it)")


def save(fname: Path, *args: Any, infos: EncodeInfos = None, nocheck: bool = False) -> None:
    """Writes the arrays given as arguments to a .ten file."""
    _check_name(fname, nocheck)
    _c.write_ten(os.fspath(fname), list(args), infos)


def load(fname: Path, infos: DecodeInfos = False, nocheck: bool = False) -> Any:
    """Every array of a .ten file (several lists back to back come as one list)."""
    _check_name(fname, nocheck)
    arrays, got = _c.read_ten(os.fspath(fname))
    return check_infos(arrays, got, infos)


def load_lists(fname: Path, tensors_per_list: int = 0, infos: DecodeInfos = False) -> List[Any]:
    """The lists of a .ten file of lists back to back (as `tenbin record` writes),
    split every tensors_per_list arrays (0: inferred from the arrays' signatures)."""
    return [check_infos(arrays, got, infos) for arrays, got in _c.read_ten_lists(os.fspath(fname), tensors_per_list)]


# --- over ZeroMQ ---------------------------------------------------------------------

def zsend_single(socket: Any, l: Arrays, infos: EncodeInfos = None) -> Any:
    """Sends a list of arrays as one single-buffer message."""
    send = getattr(socket, "_tensorcom_send", None)
    if send is not None:
        return send(l, infos, multipart=False)
    return socket.send(encode_buffer(l, infos=infos), copy=False)


def zrecv_single(socket: Any, infos: DecodeInfos = False) -> Any:
    """Receives a single-buffer message's arrays (from a Connection's socket: either framing)."""
    recv = getattr(socket, "_tensorcom_recv", None)
    if recv is not None:
        arrays, got = recv()
        return check_infos(arrays, got, infos)
    return decode_buffer(socket.recv(copy=False), infos=infos)


def zsend_multipart(socket: Any, l: Arrays, infos: EncodeInfos = None) -> Any:
    """Sends a list of arrays as a multipart message (two frames an array).

    On a pyzmq socket the arrays are copied, as the reference does; on a
    Connection's socket they are not (see Connection.send)."""
    send = getattr(socket, "_tensorcom_send", None)
    if send is not None:
        return send(l, infos, multipart=True)
    return socket.send_multipart(encode_list(l, infos=infos))


def zrecv_multipart(socket: Any, infos: DecodeInfos = False) -> Any:
    """Receives a multipart message's arrays (from a Connection's socket: either framing)."""
    recv = getattr(socket, "_tensorcom_recv", None)
    if recv is not None:
        arrays, got = recv()
        return check_infos(arrays, got, infos)
    return decode_list(socket.recv_multipart(copy=False), infos=infos)


# --- over SCTP (the reference's illustration, for a pysctp socket) -----------------------

def sctp_send(socket: Any, dest: Any, l: Arrays, infos: EncodeInfos = None) -> None:
    """Sends a list of arrays as one SCTP datagram to dest."""
    socket.sctp_send(bytes(encode_buffer(l, infos=infos)), to=dest)


def sctp_recv(socket: Any, infos: DecodeInfos = False, maxsize: int = 100000000) -> Any:
    """Accepts one client on a listening SCTP socket and decodes its datagram."""
    client, _ = socket.accept()
    _, _, data, _ = client.sctp_recv(maxsize)
    return decode_buffer(data, infos=infos)
