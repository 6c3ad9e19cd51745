"""Label-free faithfulness of chunk attributions: top-k log-probability drop and LDS (ContextCite).

A method gives one score per context chunk (higher = more responsible for the answer). Both metrics
ablate chunks (remove them from the prompt, which [`render_prompt`][rcattr.text.prompting.render_prompt] then
renumbers) and re-score the teacher-forced answer (Cohen-Wang et al. 2024, "ContextCite"):

* **top-k drop**: `log p(answer | all chunks) - log p(answer | all but the k top-scored chunks)`;
  larger means the top-ranked chunks really carry the answer.
* **LDS** (linear datamodeling score): the Spearman correlation, over random ablation masks, between
  the sum of the scores of the kept chunks and the actual `log p(answer | kept chunks)`.

When a mask removes every chunk, the context becomes the plain string [`EMPTY_CONTEXT`][rcattr.eval.attribution.faithfulness.EMPTY_CONTEXT] (a
`str` context, so it gets no `Document [i]:` label), since a prompt needs some context text.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from scipy.stats import spearmanr
from transformers import PreTrainedModel

from rcattr.protocols import TokenizerLike
from rcattr.text.prompting import ContextInput, render_prompt

EMPTY_CONTEXT = "(no documents)"
"""The context text of a prompt whose chunks are all ablated."""


def ablate(inp: ContextInput, keep: Sequence[bool]) -> ContextInput:
    """`inp` with only the chunks where `keep` is True (in order); [`EMPTY_CONTEXT`][rcattr.eval.attribution.faithfulness.EMPTY_CONTEXT] if none."""
    chunks = inp.chunks
    if len(keep) != len(chunks):
        raise ValueError(f"keep has {len(keep)} entries for {len(chunks)} chunks")
    if all(keep):
        return inp
    kept = [chunk for chunk, flag in zip(chunks, keep, strict=True) if flag]
    return dataclasses.replace(inp, context=kept if kept else EMPTY_CONTEXT)


@torch.no_grad()
def answer_log_probs(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    inp: ContextInput,
    answer: str,
    keep: torch.Tensor,
    *,
    batch_size: int = 4,
) -> torch.Tensor:
    """Teacher-forced `sum log p(answer tokens)` for each row of `keep` (bool [M, n_chunks]) -> float64 [M].

    The chunks where a row is False are removed from the context (see [`ablate`][rcattr.eval.attribution.faithfulness.ablate]). The prompt
    is tokenized as `render_prompt` says and the answer without special tokens, then concatenated.
    Rows are run `batch_size` at a time, left-padded with an attention mask and explicit position
    ids, so the answer sits at the same final positions of every row and only its logits are computed.
    """
    if keep.ndim != 2 or keep.shape[1] != len(inp.chunks):
        raise ValueError(f"keep must be [M, {len(inp.chunks)}], got {list(keep.shape)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    answer_ids = list(tokenizer(answer, add_special_tokens=False)["input_ids"])
    if not answer_ids:
        raise ValueError("the answer has no tokens")
    device = model.device
    target = torch.tensor(answer_ids, device=device)
    rows = keep.bool().tolist()
    out = torch.empty(len(rows), dtype=torch.float64)
    for start in range(0, len(rows), batch_size):
        seqs = []
        for row in rows[start : start + batch_size]:
            prompt = render_prompt(tokenizer, ablate(inp, row))
            prompt_ids = tokenizer(prompt.text, add_special_tokens=prompt.add_special_tokens)["input_ids"]
            seqs.append(list(prompt_ids) + answer_ids)
        width = max(len(seq) for seq in seqs)
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        mask = torch.zeros(len(seqs), width, dtype=torch.long)
        for i, seq in enumerate(seqs):
            ids[i, width - len(seq) :] = torch.tensor(seq)
            mask[i, width - len(seq) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            logits_to_keep=len(answer_ids) + 1,
        ).logits
        # the last len(answer)+1 positions; position t predicts token t+1, so drop the final one
        log_probs = logits[:, :-1].float().log_softmax(-1)
        picked = log_probs.gather(-1, target.expand(len(seqs), -1).unsqueeze(-1)).squeeze(-1)
        out[start : start + len(seqs)] = picked.double().sum(-1).cpu()
    return out


def ablation_masks(
    n_chunks: int, n_samples: int, *, keep_probability: float = 0.5, seed: int = 0
) -> torch.Tensor:
    """Random keep-masks -> bool [n_samples, n_chunks], each chunk kept with `keep_probability` (seeded)."""
    if not 0.0 <= keep_probability <= 1.0:
        raise ValueError(f"keep_probability must be in [0, 1], got {keep_probability}")
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n_samples, n_chunks, generator=generator) < keep_probability


def top_k_masks(scores: torch.Tensor, ks: Sequence[int]) -> torch.Tensor:
    """Keep-masks without the k top-scored chunks, one row per k: scores [n] -> bool [len(ks), n].

    Ties are broken by the lower index (it counts as higher ranked). `k >= n` removes every chunk.
    """
    if scores.ndim != 1:
        raise ValueError(f"scores must be 1-d, got shape {list(scores.shape)}")
    if torch.isnan(scores).any():
        raise ValueError("scores contain nan")
    if any(k < 0 for k in ks):
        raise ValueError(f"ks must be >= 0, got {list(ks)}")
    order = torch.sort(scores.detach().cpu(), descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(order))
    return rank.unsqueeze(0) >= torch.tensor(list(ks), dtype=torch.long).unsqueeze(1)


def log_prob_drop(full: float, ablated: torch.Tensor) -> torch.Tensor:
    """`full - ablated`: how much the answer's log-probability falls under each ablation, [K] -> [K]."""
    return full - ablated


def lds(scores: torch.Tensor, masks: torch.Tensor, actual: torch.Tensor) -> float:
    """Spearman correlation of `masks @ scores` with `actual`: scores [n], masks bool [M, n], actual [M].

    Returns nan when the predictions or the actual values are constant (the correlation is undefined).
    """
    if masks.ndim != 2 or masks.shape != (actual.shape[0], scores.shape[0]):
        raise ValueError(
            f"masks must be [M, n] with M = len(actual), n = len(scores); got {list(masks.shape)}, "
            f"{list(actual.shape)}, {list(scores.shape)}"
        )
    predicted = (masks.detach().cpu().double() @ scores.detach().cpu().double()).numpy()
    real = actual.detach().cpu().double().numpy()
    if np.ptp(predicted) == 0 or np.ptp(real) == 0:
        return math.nan
    return float(spearmanr(predicted, real).statistic)


def faithfulness(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    inp: ContextInput,
    answer: str,
    scores: Mapping[str, torch.Tensor],
    *,
    ks: Sequence[int] = (1, 3),
    n_samples: int = 32,
    seed: int = 0,
    batch_size: int = 4,
) -> dict[str, dict[str, float]]:
    """Per method in `scores` (each [n_chunks]): `{"drop@k": ..., "lds": ...}`.

    All ablations (the full context, the `n_samples` LDS masks shared by every method, and each
    method's top-k masks) are deduplicated and scored in one [`answer_log_probs`][rcattr.eval.attribution.faithfulness.answer_log_probs] call. `drop@k`
    is nan for `k >= n_chunks` (it would ablate the whole context).
    """
    n = len(inp.chunks)
    for name, method_scores in scores.items():
        if method_scores.shape != (n,):
            raise ValueError(f"scores[{name!r}] must have shape [{n}], got {list(method_scores.shape)}")
    valid_ks = [k for k in ks if k < n]
    lds_masks = ablation_masks(n, n_samples, seed=seed)
    blocks = [torch.ones(1, n, dtype=torch.bool), lds_masks]
    blocks += [top_k_masks(method_scores, valid_ks) for method_scores in scores.values()]
    unique, inverse = torch.unique(torch.cat(blocks).to(torch.uint8), dim=0, return_inverse=True)
    values = answer_log_probs(model, tokenizer, inp, answer, unique.bool(), batch_size=batch_size)[inverse]
    full = float(values[0])
    actual = values[1 : 1 + n_samples]
    results: dict[str, dict[str, float]] = {}
    offset = 1 + n_samples
    for name, method_scores in scores.items():
        drops = log_prob_drop(full, values[offset : offset + len(valid_ks)]).tolist()
        offset += len(valid_ks)
        by_k = dict(zip(valid_ks, drops, strict=True))
        result = {f"drop@{k}": by_k.get(k, math.nan) for k in ks}
        result["lds"] = lds(method_scores, lds_masks, actual)
        results[name] = result
    return results
