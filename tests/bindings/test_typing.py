"""The package's typing as installed: py.typed marks it as annotated, and
_tensorcom.pyi (the C++ extension's types, which no tool can read from the
extension itself) names every exception class the extension defines, with
the same bases.
"""

import ast
import os

import tensorcom
from tensorcom import _tensorcom

PACKAGE = os.path.dirname(tensorcom.__file__)


def stub_classes():
    """{class name: [base names]} of _tensorcom.pyi's classes."""
    with open(os.path.join(PACKAGE, "_tensorcom.pyi")) as f:
        tree = ast.parse(f.read())
    return {node.name: [ast.unparse(base) for base in node.bases] for node in tree.body
            if isinstance(node, ast.ClassDef)}


def test_the_package_is_marked_typed():
    assert os.path.isfile(os.path.join(PACKAGE, "py.typed"))


def test_the_stub_has_the_extensions_exceptions_with_their_bases():
    stub = stub_classes()
    exceptions = {name: value for name, value in vars(_tensorcom).items()
                  if isinstance(value, type) and issubclass(value, BaseException)}
    assert {"Error", "ArgumentError", "TimeoutError"} <= set(exceptions)
    assert set(exceptions) <= set(stub), f"not in _tensorcom.pyi: {sorted(set(exceptions) - set(stub))}"
    for name, cls in exceptions.items():
        bases = [b.__name__ if b.__module__ in ("tensorcom", "tensorcom._tensorcom") else f"builtins.{b.__name__}"
                 for b in cls.__bases__]
        written = [b if b.startswith("builtins.") or b in exceptions else f"builtins.{b}" for b in stub[name]]
        assert written == bases, f"{name}: the stub says {stub[name]}, the extension {bases}"


def test_the_stub_has_statistics_and_every_name_the_package_takes_from_the_extension():
    stub = stub_classes()
    assert "Statistics" in stub
    for name in tensorcom.__all__:
        try:
            value = getattr(tensorcom, name)
        except ModuleNotFoundError:  # TensorcomDataset without torch: not the extension's anyway
            continue
        if getattr(value, "__module__", None) in ("tensorcom", "tensorcom._tensorcom") and \
                getattr(_tensorcom, name, None) is value:
            assert name in stub, f"tensorcom.{name} comes from the extension: give its type in _tensorcom.pyi"
