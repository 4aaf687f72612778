"""Fixtures shared by the Python package's tests."""

import shutil
import tempfile

import pytest


@pytest.fixture
def ipc_dir():
    """A private temp dir for ipc sockets: short, as ipc paths must fit in sun_path."""
    d = tempfile.mkdtemp(prefix="tc-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)
