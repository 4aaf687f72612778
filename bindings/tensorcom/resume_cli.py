"""The resume-token command, for batch scripts (examples/slurm/):

    python3 -m tensorcom.resume merge OUT IN...   the union of token files, written atomically
    python3 -m tensorcom.resume show FILE         a line per stream: what the token says was consumed

A bad token or file (one that is not a regular file included) is one line
on stderr, control characters escaped, and exit status 2. It does not
load the C++ extension (tensorcom.resume's token code is pure Python), so
it starts quickly and runs where the extension cannot load.
"""

import argparse
import json
import os
import stat
import sys
from typing import Any, Dict, List, Optional

from .resume import _Invalid, _merge, _parse, _printable, _stream_lines, write_token

PROGRAM = "python3 -m tensorcom.resume"
MAX_FILE_BYTES = 64 << 20  # a token file is read whole


class _BadInput(Exception):
    """A token file that cannot be used; the message names it."""


def _read_token(path: str) -> Dict[str, Any]:
    """The validated token in the JSON file at path, or _BadInput naming it."""
    try:
        # Opened without blocking and checked before reading: a FIFO would
        # wait for a writer, a device might never end.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise _BadInput(f"{path}: cannot read: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _BadInput(f"{path}: not a regular file")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_FILE_BYTES + 1)
        except OSError as e:
            raise _BadInput(f"{path}: cannot read: {e.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise _BadInput(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    try:
        token = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise _BadInput(f"{path}: not JSON: {e}") from None
    try:
        _parse(token)
    except _Invalid as e:
        raise _BadInput(f"{path}: {e}") from None
    return token


def _merge_command(args: argparse.Namespace) -> None:
    tokens = [_read_token(path) for path in args.inputs]
    try:
        merged = _merge(tokens)
    except _Invalid as e:
        raise _BadInput(f"{' '.join(args.inputs)}: {e}") from None
    try:
        write_token(args.out, merged)
    except OSError as e:
        raise _BadInput(f"{args.out}: cannot write: {e.strerror}") from None
    print(f"{PROGRAM} merge: {len(tokens)} token file{'s' if len(tokens) > 1 else ''} -> {args.out}: "
          f"{len(merged['streams'])} streams, lowest incomplete epoch {merged['epoch']}")


def _show_command(args: argparse.Namespace) -> None:
    for line in _stream_lines(_read_token(args.file)):
        print(line)


def main(argv: Optional[List[str]] = None) -> int:
    """The command (module docstring); returns the exit status."""
    p = argparse.ArgumentParser(prog=PROGRAM, description="Resume tokens: merge several, show one.")
    sub = p.add_subparsers(dest="command", required=True)
    merge = sub.add_parser("merge", help="write the union of token files to OUT, atomically")
    merge.add_argument("out", metavar="OUT")
    merge.add_argument("inputs", metavar="IN", nargs="+")
    show = sub.add_parser("show", help="a line per stream of a token file")
    show.add_argument("file", metavar="FILE")
    args = p.parse_args(argv)
    try:
        (_merge_command if args.command == "merge" else _show_command)(args)
    except _BadInput as e:
        print(f"{PROGRAM} {args.command}: error: {_printable(str(e))}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
