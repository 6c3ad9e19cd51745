"""Attribution accuracy against gold (answer span -> source) labels.

The paper's Table 1 metric is chunk-level: an answer span is attributed correctly when the context
span with the highest score belongs to the span's gold source. With sentence or token context
spans the same rule scores the source of the top sentence or token, and, where the gold text is a
verbatim quote of its source (about 92% of QuoteSum spans), [`location_hits`][rcattr.eval.common.metrics.location_hits] also checks that
the top span overlaps the quoted location. Ties go to the lowest span index (`torch.argmax`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from rcattr.eval.common.datasets import BenchmarkRecord, GoldSpan
from rcattr.text.segmentation import TextSpan


def top_spans(scores: torch.Tensor) -> list[int]:
    """Index of the highest-scoring context span per output unit; `scores [n_outputs, n_spans]`."""
    return torch.argmax(scores.float(), dim=-1).tolist()


def source_hits(
    scores: torch.Tensor, context_spans: Sequence[TextSpan], gold: Sequence[GoldSpan]
) -> list[bool]:
    """Per gold span (one output unit each): is the top context span in the gold source?"""
    if scores.shape[0] != len(gold):
        raise ValueError(f"{scores.shape[0]} output units for {len(gold)} gold spans")
    return [
        context_spans[top].source == span.source for top, span in zip(top_spans(scores), gold, strict=True)
    ]


def quote_location(span: GoldSpan, chunks: Sequence[str]) -> tuple[int, int] | None:
    """`(start, end)` of the gold text in its source chunk, or None when it is not a verbatim quote."""
    start = chunks[span.source].find(span.text)
    return None if start < 0 else (start, start + len(span.text))


def location_hits(
    scores: torch.Tensor, context_spans: Sequence[TextSpan], record: BenchmarkRecord
) -> list[bool | None]:
    """Per gold span: does the top context span overlap the quoted text? None where it is not a quote."""
    hits: list[bool | None] = []
    for top, span in zip(top_spans(scores), record.gold, strict=True):
        location = quote_location(span, record.chunks)
        if location is None:
            hits.append(None)
            continue
        best = context_spans[top]
        hits.append(best.source == span.source and best.start < location[1] and location[0] < best.end)
    return hits


def accuracy(hits: Sequence[bool | None]) -> tuple[float, int]:
    """Fraction of true hits among the defined ones, and how many were defined (nan when none)."""
    defined = [hit for hit in hits if hit is not None]
    return (sum(defined) / len(defined) if defined else float("nan")), len(defined)


def _per_record(hits: Sequence[Sequence[bool | None]]) -> tuple[np.ndarray, np.ndarray]:
    """Correct and defined counts per record, the unit a bootstrap resamples."""
    correct = np.array([sum(1 for hit in row if hit) for row in hits], dtype=np.float64)
    defined = np.array([sum(1 for hit in row if hit is not None) for row in hits], dtype=np.float64)
    return correct, defined


def resample_records(n_records: int, n_boot: int, seed: int) -> np.ndarray:
    """`[n_boot, n_records]` record indices drawn with replacement: the bootstrap's resamples."""
    return np.random.default_rng(seed).integers(0, n_records, size=(n_boot, n_records))


def bootstrap_interval(
    hits: Sequence[Sequence[bool | None]], *, level: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the accuracy, resampling whole records.

    Spans of one record share its context, so they are not independent: the records are the unit
    resampled (a cluster bootstrap), and each resample's accuracy is its correct spans over its
    defined ones. `hits` holds one list of per-span hits (None: undefined) per record.
    """
    correct, defined = _per_record(hits)
    if defined.sum() == 0:
        return float("nan"), float("nan")
    draws = resample_records(len(correct), n_boot, seed)
    ratios = correct[draws].sum(1) / np.maximum(defined[draws].sum(1), 1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def paired_difference(
    hits: Sequence[Sequence[bool | None]],
    reference: Sequence[Sequence[bool | None]],
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Accuracy of `hits` minus that of `reference` on the same records, with a paired interval.

    Both lists hold the same records in the same order, with the same defined spans; the bootstrap
    draws records once for both methods, so what the two share (a hard record) cancels out.
    Returns `(difference, low, high)`.
    """
    if len(hits) != len(reference):
        raise ValueError(f"paired comparison needs the same records: {len(hits)} against {len(reference)}")
    correct, defined = _per_record(hits)
    base, base_defined = _per_record(reference)
    if not np.array_equal(defined, base_defined):
        raise ValueError("paired comparison needs the same defined spans in every record")
    if defined.sum() == 0:
        return float("nan"), float("nan"), float("nan")
    draws = resample_records(len(correct), n_boot, seed)
    diffs = (correct[draws].sum(1) - base[draws].sum(1)) / np.maximum(defined[draws].sum(1), 1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return float((correct.sum() - base.sum()) / defined.sum()), float(low), float(high)


def mean_interval(
    values: Sequence[float] | np.ndarray, *, level: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of per-record `values` with its percentile bootstrap interval: `(mean, low, high)`."""
    return paired_mean_difference(values, np.zeros(len(values)), level=level, n_boot=n_boot, seed=seed)


def paired_mean_difference(
    values: Sequence[float] | np.ndarray,
    reference: Sequence[float] | np.ndarray,
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean of `values - reference` over the same records, with a paired percentile bootstrap interval.

    For per-record measurements (a value error rate, an answer match) of two methods on the same
    records in the same order; a resample draws records once for both. Returns `(difference, low, high)`.
    """
    if len(values) != len(reference):
        raise ValueError(f"paired comparison needs the same records: {len(values)} against {len(reference)}")
    differences = np.asarray(values, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    if not len(differences):
        return float("nan"), float("nan"), float("nan")
    means = differences[resample_records(len(differences), n_boot, seed)].mean(1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(differences.mean()), float(low), float(high)


def resampled_summary(
    value: float,
    resampled: np.ndarray,
    reference: float,
    reference_resampled: np.ndarray,
    name: str,
    key: str = "auroc",
) -> dict[str, float]:
    """A statistic (under `key`) with its 95% percentile interval over bootstrap resamples, and its
    difference to the `name` reference with the paired interval (`resampled` and `reference_resampled`
    come from the same draws)."""
    low, high = np.percentile(resampled, [2.5, 97.5])
    difference_low, difference_high = np.percentile(resampled - reference_resampled, [2.5, 97.5])
    return {
        key: value,
        "low": float(low),
        "high": float(high),
        f"minus_{name}": value - reference,
        "difference_low": float(difference_low),
        "difference_high": float(difference_high),
    }


def macro_f1(labels: np.ndarray, predictions: np.ndarray) -> float:
    """sklearn's `f1_score(labels, predictions, average="macro")` for 0/1 labels, without its overhead (the
    bootstrap calls it thousands of times): the mean F1 of the classes either array has."""
    labels, predictions = np.asarray(labels, dtype=bool), np.asarray(predictions, dtype=bool)
    scores = []
    for positive in (False, True):
        hits, said = labels == positive, predictions == positive
        true, wrong = int((hits & said).sum()), int((hits ^ said).sum())
        if true or wrong:
            scores.append(2 * true / (2 * true + wrong))
    return float(np.mean(scores))
