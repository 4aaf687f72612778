"""Child processes for tests: never left running, pipes always closed."""
import subprocess
from contextlib import contextmanager


@contextmanager
def killing(proc):
    """Yields proc; afterwards kills it if it still runs, reaps it and closes its pipes."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


@contextmanager
def running(args, **kw):
    """args started with stdout and stderr piped (stdin closed), as killing() ends it."""
    proc = subprocess.Popen([str(a) for a in args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)
    with killing(proc):
        yield proc
