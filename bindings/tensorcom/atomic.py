"""Files replaced whole or not at all: written beside, then renamed over.

    from tensorcom.atomic import atomic_write, atomic_writer

    atomic_write("token.json", json.dumps(token))
    with atomic_writer("model.pt") as f:      # a binary file object
        torch.save(state, f)

Readers of the path see the old contents or the new, never a mix, an empty
file or a part, whatever happens to the writer: the new contents go to a
temporary file of a unique name in the same directory, are flushed to disk
(fsync), and the temporary is renamed over the path (os.replace, atomic on
POSIX file systems), then the rename itself is flushed (fsync of the
directory). An existing file's permission bits are kept; a new file gets
0o666 less the umask, as open() would give it.

On any error (the caller's included) the temporary is removed and the path
is untouched. A writer killed outright (SIGKILL, a crash, a power cut)
cannot remove its temporary: each such write leaves at most one, named
".<name>.tmp-<host>-<pid>-<random>" beside the path. The next write of the
same path from the same host removes those whose process is gone, so
temporaries do not pile up across preemptions; those of a live process, or
of another host (the directory may be shared), are left alone.

Pure Python: it does not load the C++ extension.
"""

import contextlib
import errno
import os
import socket
import tempfile
from typing import IO, Iterator, Optional, Union

__all__ = ["atomic_write", "atomic_writer", "temporary_prefix"]

# File names are at most 255 bytes; the temporary's name is the path's own
# plus the host, process and random part, so long ones are cut (the prefix
# stays a function of the path alone, which finding stale ones relies on).
_NAME_KEPT = 120
_HOST_KEPT = 64

PathLike = Union[str, "os.PathLike[str]"]


def _host() -> str:
    return socket.gethostname().replace("/", "_")[:_HOST_KEPT] or "localhost"


def temporary_prefix(path: PathLike) -> str:
    """The file name every temporary written for path starts with (no
    directory): ".<name>.tmp-"."""
    return f".{os.path.basename(os.fspath(path))[:_NAME_KEPT]}.tmp-"


def _umask() -> int:
    """The process' umask, read without changing it where Linux says it
    (os.umask can only read it by setting it, which races other threads)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _remove_stale(directory: str, prefix: str, host: str) -> None:
    """Removes temporaries for the same path left by dead processes of this host."""
    mine = prefix + host + "-"
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.startswith(mine):
            continue
        # "<pid>-<random>": mkstemp's random part has no "-", so the name of
        # another host whose name starts with this one's and a "-" has more.
        parts = name[len(mine):].split("-")
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        pid = int(parts[0])
        if pid == os.getpid() or _alive(pid):
            continue
        with contextlib.suppress(OSError):  # gone already, or not ours to remove
            os.unlink(os.path.join(directory, name))


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:  # a file system that cannot sync directories
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_writer(path: PathLike, mode: str = "wb", *, encoding: Optional[str] = None) -> Iterator[IO]:
    """A context manager giving a new file object (mode "wb" or "w") whose
    contents replace path's when the `with` block ends without an error
    (module docstring). Text mode writes UTF-8 unless encoding says
    otherwise. An error in the block, or in writing, leaves path as it was
    and no temporary file."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_writer: mode must be 'w' or 'wb', not {mode!r}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    prefix, host = temporary_prefix(path), _host()
    _remove_stale(directory, prefix, host)
    try:
        permissions = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        permissions = 0o666 & ~_umask()
    fd, temp = tempfile.mkstemp(prefix=f"{prefix}{host}-{os.getpid()}-", dir=directory)
    try:
        os.fchmod(fd, permissions)
        with os.fdopen(fd, mode, encoding=(encoding or "utf-8") if mode == "w" else None) as f:
            fd = -1  # the file object owns it now
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    _fsync_directory(directory)


def atomic_write(path: PathLike, data: Union[bytes, bytearray, memoryview, str], *,
                 encoding: str = "utf-8") -> None:
    """Replaces path's contents by data (bytes, or str written in
    `encoding`) atomically (module docstring)."""
    if isinstance(data, str):
        data = data.encode(encoding)
    with atomic_writer(path, "wb") as f:
        f.write(data)
