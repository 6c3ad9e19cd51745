"""Head scores (DESIGN §2 step 1) and unsupervised head selection.

A head's score compares its cross-contextualization X = X(p_ctx, g), the logits from every answer
token to the context, with its self-contextualization Y = Y(g, g). Raw E[Z] is not comparable
across heads whose logits live on different scales (DESIGN §6: on Qwen2.5 it picks early-layer
heads), so two scale-free scores are offered beside it; the default, P(X > Y), is the probability
of superiority, which needs only the counts of the shared sort + searchsorted kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from rcattr.stats import expected_rc, probability_of_superiority

HeadScore = Literal["superiority", "rc_std", "rc"]
HEAD_SCORES: tuple[str, ...] = ("superiority", "rc_std", "rc")


def layer_head_scores(
    cross: torch.Tensor,
    cross_visible: torch.Tensor,
    self_logits: torch.Tensor,
    self_visible: torch.Tensor,
    kind: HeadScore = "superiority",
) -> torch.Tensor:
    """Score every head of one layer.

    Parameters
    ----------
    cross : Tensor, shape [H, R, C]
        Logits from the ``R`` answer rows to the ``C`` context tokens.
    cross_visible : Tensor of bool, shape [R, C]
        Which of those pairs the model attends (a sliding window may hide far context).
    self_logits : Tensor, shape [H, R, A]
        Logits from the answer rows to the ``A`` answer tokens.
    self_visible : Tensor of bool, shape [R, A]
        The causal (and windowed) pairs among them.
    kind : {"superiority", "rc_std", "rc"}
        ``P(X > Y)``; ``E[Z] / std(Y)``; or the raw ``E[Z]`` of the paper.

    Returns
    -------
    Tensor, shape [H], float64
        0 for every head when no context pair is visible.
    """
    if kind not in HEAD_SCORES:
        raise ValueError(f"unknown head score {kind!r}; choose one of {list(HEAD_SCORES)}")
    x, x_mask = cross.flatten(1), cross_visible.flatten()[None]
    y, y_mask = self_logits.flatten(1), self_visible.flatten()[None]
    if not bool(x_mask.any()):
        return torch.zeros(cross.shape[0], dtype=torch.float64, device=cross.device)
    if kind == "superiority":
        return probability_of_superiority(x, y, x_mask=x_mask, y_mask=y_mask)
    score = expected_rc(x, y, x_mask=x_mask, y_mask=y_mask)
    if kind == "rc":
        return score
    valid = y.to(torch.float64)[:, y_mask[0]]
    return score / valid.std(dim=1, correction=0).clamp_min(torch.finfo(torch.float64).tiny)


def top_heads(scores: torch.Tensor, k: int | float = 20, *, bottom: bool = False) -> torch.Tensor:
    """The ``k`` best (or worst) heads of a ``[layers, heads]`` score table.

    Parameters
    ----------
    scores : Tensor, shape [L, H]
    k : int or float, default 20
        Number of heads, or a fraction of all heads when a float in ``(0, 1]``.
    bottom : bool, default False
        Take the lowest-scoring heads instead (the paper's ablation).

    Returns
    -------
    Tensor of long, shape [k, 2]
        ``(layer, head)`` pairs, best first (worst first with ``bottom=True``).
    """
    total = scores.numel()
    if isinstance(k, float) and not 0 < k <= 1:
        raise ValueError(f"top_k={k!r} as a fraction of the model's {total} heads must be in (0, 1]")
    count = max(1, round(k * total)) if isinstance(k, float) else int(k)
    if not 1 <= count <= total:
        raise ValueError(
            f"top_k={k!r} selects {count} heads; the model has {total} (use 1..{total} or a fraction)"
        )
    flat = scores.flatten().topk(count, largest=not bottom).indices
    n_heads = scores.shape[1]
    return torch.stack([flat // n_heads, flat % n_heads], dim=1)


def fixed_heads(heads: Sequence[tuple[int, int]], n_layers: int, n_heads: int) -> torch.Tensor:
    """A caller-given list of ``(layer, head)`` pairs as a ``[k, 2]`` tensor, checked against the model."""
    table = torch.as_tensor([list(pair) for pair in heads], dtype=torch.long).reshape(-1, 2)
    if table.numel() == 0:
        raise ValueError("heads is empty; give at least one (layer, head) pair")
    bad = (table[:, 0] < 0) | (table[:, 0] >= n_layers) | (table[:, 1] < 0) | (table[:, 1] >= n_heads)
    if bool(bad.any()):
        layer, head = table[bad][0].tolist()
        raise ValueError(
            f"head ({layer}, {head}) does not exist; the model has {n_layers} layers x {n_heads} heads"
        )
    return table
