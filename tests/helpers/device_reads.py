"""Counting the operations that make the host wait for a GPU (``int(t)``, ``t.item()``, ``bool(t)``,
``nonzero``, indexing by a bool mask, ``masked_select``, ``unique``, ``repeat_interleave`` by a tensor), on any
device: below autograd, by the operation and the innermost line of rcattr that asked. Copies between host and
device are not counted (on the CPU there are none). ``benchmarks/device_reads.py`` reports them for one
``attribute()`` call."""

from __future__ import annotations

import traceback
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_aten = torch.ops.aten
READS = {
    _aten._local_scalar_dense.default: "read a scalar",
    _aten.nonzero.default: "nonzero",
    _aten.masked_select.default: "masked_select",
    _aten._unique2.default: "unique",
    _aten.unique_dim.default: "unique",
    _aten.unique_consecutive.default: "unique",
    _aten.repeat_interleave.Tensor: "repeat_interleave",
}
_INDEXING = {_aten.index.Tensor, _aten.index_put.default, _aten.index_put_.default}


def _asker() -> str:
    """The innermost frame of rcattr (else of transformers) on the stack, as ``folder/file.py:line function``."""
    frames = traceback.extract_stack()[:-3]
    ours = [f for f in frames if "/rcattr/" in f.filename] or [
        f for f in frames if "transformers" in f.filename
    ]
    if not ours:
        return "elsewhere"
    frame = ours[-1]
    return f"{'/'.join(frame.filename.split('/')[-2:])}:{frame.lineno} {frame.name}"


class DeviceReads(TorchDispatchMode):
    """``with DeviceReads() as reads: ...`` counts, in ``reads.counts``, the reads by (operation, asking line)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[tuple[str, str]] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = READS.get(func)
        if func in _INDEXING and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1] or []
        ):
            name = "index by a bool mask"
        if name is not None:
            self.counts[(name, _asker())] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.counts.values())
