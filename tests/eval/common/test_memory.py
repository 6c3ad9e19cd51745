"""Peak memory of a run (rcattr.eval.common.memory)."""

from __future__ import annotations

import torch

from rcattr.eval.common.memory import PeakMemory


def test_peak_memory_sees_an_allocation() -> None:
    with PeakMemory(interval=0.001) as peak:
        block = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
        block += 1
    assert peak.mib > 32
