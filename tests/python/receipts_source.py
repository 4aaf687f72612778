"""tensorcom.receipts loaded from the source tree by path, for tests that
receive with pyzmq and must confirm what a server sends, whether or not the
Python package is built (importing the package would load the extension
of whichever tensorcom is on the path)."""

import importlib.util
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "tensorcom", "receipts.py")
_spec = importlib.util.spec_from_file_location("tensorcom_receipts_source", _PATH)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
Receipts = _module.Receipts
