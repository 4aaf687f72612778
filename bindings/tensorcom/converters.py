"""Converters: what a Connection applies to each received array, as the
reference's `converters=` argument.

A converter is a callable taking one array and returning anything, or None
(leave the array alone), or a name from converter_table. A list of them is
applied round-robin over the batch's arrays (transform_with).
"""

from ._tensorcom import ArgumentError


def _torch_support():
    """tensorcom.torch, imported on first use: torch is optional."""
    from . import torch
    return torch


# Name -> factory: every Connection gets converters of its own (the CUDA one
# keeps a stream).
converter_table = {
    "numpy": lambda: None,
    "torch": lambda: _torch_support().TorchConverter(),
    "torch_cuda": lambda: _torch_support().CudaConverter(),
}


def device_converter(device):
    """The converter for a Connection's device=: torch tensors on that device."""
    name = str(device)
    if name == "cpu":
        return "torch"
    if name.startswith("cuda"):
        return _torch_support().CudaConverter(device=name)
    raise ArgumentError(f"unknown device {device!r} (cpu, cuda or cuda:N)")


def listify(x):
    """None for None, a list or tuple as is, [x] for anything else."""
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return x
    return [x]


def make_converters(spec):
    """The converters for a `converters=` argument: None, or a list of callables and Nones."""
    items = listify(spec)
    if items is None:
        return None
    out = []
    for item in items:
        if isinstance(item, str):
            factory = converter_table.get(item)
            if factory is None:
                raise ArgumentError(f"unknown converter {item!r} (known: {', '.join(sorted(converter_table))})")
            out.append(factory())
        elif item is None or callable(item):
            out.append(item)
        else:
            raise ArgumentError(f"a converter is a name, a callable or None, not {item!r}")
    return out


def transform_with(sample, transformers):
    """Applies transformers[i % len(transformers)] to sample[i] (None: unchanged)."""
    if not transformers:
        return sample
    result = list(sample)
    for i, value in enumerate(result):
        f = transformers[i % len(transformers)]
        if f is not None:
            result[i] = f(value)
    return result
