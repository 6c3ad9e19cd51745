"""Peak resident memory of a block of code, sampled by a background thread (Linux `/proc`)."""

from __future__ import annotations

import os
import resource
import threading
from types import TracebackType

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """Current resident set size of this process (peak RSS where `/proc` is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakMemory:
    """`with PeakMemory() as peak: ...` then `peak.mib`: the largest RSS growth seen inside the block.

    Memory the process freed earlier and reuses inside the block is not counted, so run the
    heaviest part first or in a fresh process when the figure matters.
    """

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.start = self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, resident_bytes())

    def __enter__(self) -> PeakMemory:
        self.start = self.peak = resident_bytes()
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, resident_bytes())

    @property
    def mib(self) -> float:
        return (self.peak - self.start) / 2**20
