"""Hypothesis strategies for the statistics' property tests: pairs of samples X and Y with ties and offsets."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import settings
from hypothesis import strategies as st

# Values are float32-representable so the float64 references are exact-ish and midpoints of
# distinct points are strictly between them.
_floats = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=32)
_big = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=32)
_ints = st.integers(-4, 4).map(float)  # forces ties and duplicates


def sample(min_size: int = 1, max_size: int = 30) -> st.SearchStrategy[list[float]]:
    """Lists of small integers (ties), float32 values, or both with large ones."""
    return st.one_of(
        st.lists(_ints, min_size=min_size, max_size=max_size),
        st.lists(_floats, min_size=min_size, max_size=max_size),
        st.lists(st.one_of(_ints, _big), min_size=min_size, max_size=max_size),
    )


@st.composite
def pairs(draw: st.DrawFn, equal_sizes: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Two float64 samples X and Y of float32 values, possibly sharing a large offset."""
    x = draw(sample())
    if equal_sizes:
        y = draw(st.lists(st.one_of(_ints, _floats), min_size=len(x), max_size=len(x)))
    else:
        y = draw(sample())
    offset = draw(st.sampled_from([0.0, 0.0, 1e5, -3e4]))  # large shared magnitude
    xa = (np.asarray(x, dtype=np.float32) + np.float32(offset)).astype(np.float64)
    ya = (np.asarray(y, dtype=np.float32) + np.float32(offset)).astype(np.float64)
    return xa, ya


def as_tensor(a: np.ndarray) -> torch.Tensor:
    """``a`` as a tensor sharing its float64 values."""
    return torch.from_numpy(np.ascontiguousarray(a))


def tolerance(*arrays: np.ndarray) -> float:
    """An absolute tolerance for float64 sums at the arrays' scale."""
    scale = max(float(np.abs(a).max()) for a in arrays)
    return 1e-9 * (1.0 + scale)


SETTINGS = settings(deadline=None, max_examples=200)
