"""Exact statistics of relative contextualization between two samples of attention logits.

This package implements the quantities of RCStat (arXiv 2506.19549) in pure torch. For two
samples `X` (size `nx`) and `Y` (size `ny`) of raw attention logits, the *relative
contextualization* is `Z = max(X - Y, 0)` and its reverse is `Z' = max(Y - X, 0)`.

Product coupling (every `x` paired with every `y`, uniformly)
    `E[Z] = mean_x phi_Y(x)` with `phi_Y(x) = (x * #{y < x} - sum_{y < x} y) / ny`.
    After sorting `Y` once and taking prefix sums, every `phi_Y(x)` costs one binary
    search, so `E[Z]` is exact in `O((nx + ny) log ny)` instead of `O(nx * ny)`.
    The reverse uses `phi'_Y(x) = (sum_{y > x} y - x * #{y > x}) / ny` computed from suffix
    sums directly (not via `E[Z] - E[Z'] = mean(X) - mean(Y)`), which keeps float32 accurate.

Bounds valid for every coupling (paper Thm 3.1 / Alg 1)
    `int max(F_Y - F_X, 0) dt <= E[Z] <= int min(F_Y, 1 - F_X) dt` with the empirical,
    right-continuous CDFs `F`. Both integrands are step functions that are constant between
    consecutive points of the sorted union of the two samples, so the integrals are computed
    exactly as finite sums. For `Z'` the roles of `X` and `Y` swap.

Probability of superiority
    `P(X > Y) = mean_x #{y < x} / ny` (strict inequality): the count term of `phi` alone,
    a scale-free score.

Shapes and masks
    Samples are `x: [..., nx]` and `y: [..., ny]`; leading (batch) dimensions broadcast
    against each other, e.g. `x: [layers, heads, nx]` and `y: [layers, heads, ny]`.
    Ragged sample sets are expressed with boolean masks of the sample's shape (anything
    broadcastable to it works), `True` marking a valid element. Masked entries may hold any
    value, `nan` and `inf` included; they never influence a result.

All computations accumulate in `dtype` (`torch.float32` or `torch.float64`), whatever
the input's floating dtype (bf16 and fp16 inputs are cast first).

Cost
    Fully vectorised (sorts, cumulative sums, gathers). Every `x` is located in the sorted `Y`
    by `rcattr.stats.ranks.count_below` (the kernel the head scores share), a compiled pass (numba): a uniform grid over `Y`'s range
    answers an `x` with one table lookup and two comparisons, in vector code, and the rare `x` whose
    cell holds more than two `y` by a binary search; the result is exactly `torch.searchsorted`'s. Besides the inputs, peak
    memory is a handful of `[*batch, nx]` tensors of `dtype`: about 35 bytes per element of `x` for
    [`expected_rc`][rcattr.stats.exact.expected_rc] and 60 for [`overlap_bounds`][rcattr.stats.bounds.overlap_bounds] in float64.
"""

from __future__ import annotations

from rcattr.stats.bounds import overlap_bounds
from rcattr.stats.exact import expected_rc, phi, probability_of_superiority

__all__ = ["expected_rc", "overlap_bounds", "phi", "probability_of_superiority"]
