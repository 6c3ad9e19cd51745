"""Context reliance, validated: does the answer-level RC signal tell a relevant context from an irrelevant one?

    python -m rcattr.eval.groundedness --limit 200 --out runs/groundedness

*Context relevance* (issue 20): SQuAD v2 answerable dev questions, each answered by the model (greedy, up
to ``--max-new-tokens``) once with its own paragraph and once with a paragraph of another article (seeded).
Every signal below is computed on both answers; its AUROC for telling the own-paragraph answer (positive)
from the other one is reported with a 95% percentile bootstrap interval over questions (a resample keeps
a question's two answers together), and the paired difference to the best baseline.

Signals, one per answer (higher: more reliant on the context):

- ``rc_context_heads``: the share of all the model's heads whose P(X > Y) exceeds 1/2 (the head favours
  the context over the answer itself), a data-free threshold on the score every head gets in the pass;
- ``rc_superiority``: the mean P(X > Y) over all heads; ``rc_selected``: over the RC-selected heads;
- ``rc_groundedness``: the answer tokens' mean groundedness on the RC-selected heads;
- ``rc_peak``: per head and answer token, P(max X > Y): the rank of the token's highest context logit
  among the answer's self logits Y(g, g), averaged over all heads and tokens; ``rc_peak_selected``: over
  the RC-selected heads;
- ``logprob`` and ``neg_entropy``: the answer tokens' mean log-probability and minus their mean entropy;
- ``lookback``: the lookback ratio (Chuang et al. 2024, unsupervised): per head and answer token, mean
  attention on a context token over (that + mean attention on an answer token it sees), averaged over
  all heads and tokens; ``lookback_rc``: the same over the RC-selected heads;
- ``random``: a seeded uniform draw.

Rows (one per question and condition) are appended to ``OUT/records/signals.jsonl`` as they finish, so a
run resumes where it stopped; ``OUT/results.json`` and ``results.md`` are rewritten at the end.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from tqdm import tqdm
from transformers import PreTrainedModel

from rcattr.attributor import RCAttributor
from rcattr.base import Example
from rcattr.capture import CaptureStep, LogitCapture
from rcattr.eval import kv_data
from rcattr.eval.run_store import RunStore, record_id
from rcattr.prompting import ContextInput
from rcattr.spans import attention_probabilities
from rcattr.stats import count_below, sort_values

SIGNALS = (
    "rc_context_heads",
    "rc_superiority",
    "rc_selected",
    "rc_groundedness",
    "rc_peak",
    "rc_peak_selected",
    "logprob",
    "neg_entropy",
    "lookback",
    "lookback_rc",
    "random",
)
CONDITIONS = ("own", "other")  # the positive class is "own"


@dataclass(frozen=True)
class RelevancePair:
    """A SQuAD v2 answerable question with its own paragraph and one of another article."""

    id: str
    question: str
    own: str
    other: str


def relevance_pairs(limit: int | None = None, seed: int = 0) -> list[RelevancePair]:
    """The first ``limit`` answerable SQuAD v2 dev questions, each paired with a paragraph drawn (seeded)
    from another article."""
    squad = kv_data.squad_articles()
    articles = [[paragraph["context"] for paragraph in article["paragraphs"]] for article in squad]
    rng = random.Random(seed)
    pairs: list[RelevancePair] = []
    for index, article in enumerate(squad):
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if qa["is_impossible"]:
                    continue
                other_article = rng.choice([a for i, a in enumerate(articles) if i != index])
                pairs.append(
                    RelevancePair(qa["id"], qa["question"], paragraph["context"], rng.choice(other_article))
                )
                if len(pairs) == limit:
                    return pairs
    return pairs


class LookbackReducer:
    """Per layer, each head's lookback ratio ``[H, A]`` for the answer rows of one pass.

    The ratio of a head at answer row j is ``a_ctx / (a_ctx + a_ans)``: ``a_ctx`` the mean attention on a
    context token, ``a_ans`` the mean attention on an answer token j sees (itself included).
    """

    def __init__(self, context_keys: torch.Tensor, answer_start: int) -> None:
        self.context_keys = context_keys
        self.answer_start = answer_start
        self.ratios: dict[int, torch.Tensor] = {}

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        n_answer = logits.shape[-2]
        answer_keys = torch.arange(self.answer_start, self.answer_start + n_answer, device=logits.device)
        attention = attention_probabilities(logits, step.visible, step.scaling, step.softcap)[0]  # [H, A, S]
        visible = step.visible[0]  # [A, S]
        on_context = attention[..., self.context_keys].sum(-1) / len(self.context_keys)
        seen = visible[:, answer_keys].sum(-1).clamp_min(1)  # [A]
        on_answer = attention[..., answer_keys].sum(-1) / seen
        self.ratios[step.layer_idx] = (on_context / (on_context + on_answer).clamp_min(1e-30)).float()


class PeakSuperiorityReducer:
    """Per layer, each head's ``[H, A]`` P(max X > Y) per answer row: ``#{y < max_c x_c} / |Y|`` with x the
    row's visible context logits and Y the answer's self logits Y(g, g) (0 for a row that sees no context)."""

    def __init__(self, context_keys: torch.Tensor, answer_start: int) -> None:
        self.context_keys = context_keys
        self.answer_start = answer_start
        self.scores: dict[int, torch.Tensor] = {}

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        logits, visible = logits[0], step.visible[0]  # [H, A, S], [A, S]
        answer = slice(self.answer_start, self.answer_start + logits.shape[-2])
        y = sort_values(logits[..., answer][:, visible[:, answer]])  # [H, |Y|]
        cross = logits[..., self.context_keys].masked_fill(~visible[:, self.context_keys], float("-inf"))
        peak = cross.amax(-1).contiguous()  # [H, A]
        self.scores[step.layer_idx] = count_below(peak, y).double() / y.shape[-1]


def _stack(table: dict[int, torch.Tensor]) -> torch.Tensor:
    return torch.stack([table[layer] for layer in sorted(table)])  # [L, H, A]


def baseline_signals(model: PreTrainedModel, example: Example, rc_heads: torch.Tensor) -> dict[str, float]:
    """The answer's mean log-probability, minus its mean entropy, its lookback ratios and its peak
    superiority (all heads, and the ``[k, 2]`` RC-selected ones), from one forward over ``example.ids``."""
    start, ids = example.answer_start, example.ids
    context_keys = torch.tensor(sorted({t for r in example.context_ranges for t in r}), device=ids.device)
    lookback, peak = LookbackReducer(context_keys, start), PeakSuperiorityReducer(context_keys, start)

    def reducer(logits: torch.Tensor, step: CaptureStep) -> None:
        lookback(logits, step)
        peak(logits, step)

    n_answer = ids.shape[1] - start
    with torch.no_grad(), LogitCapture(model, reducer, query_positions=slice(start, None)):
        logits = model(ids, use_cache=False, logits_to_keep=n_answer + 1).logits[0, :-1].float()
    log_probs = torch.log_softmax(logits, -1)  # [A, V]: row t predicts answer token t
    token_log_probs = log_probs.gather(-1, ids[0, start:, None])[:, 0]
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    ratios, peaks = _stack(lookback.ratios), _stack(peak.scores)  # [L, H, A]
    layers, heads = rc_heads.unbind(1)
    return {
        "rc_peak": float(peaks.mean()),
        "rc_peak_selected": float(peaks[layers, heads].mean()),
        "logprob": float(token_log_probs.mean()),
        "neg_entropy": float(-entropy.mean()),
        "lookback": float(ratios.mean()),
        "lookback_rc": float(ratios[layers, heads].mean()),
    }


def answer_signals(
    attributor: RCAttributor, context: str, question: str, gen_args: dict[str, Any], rng: random.Random
) -> dict[str, Any]:
    """Generate the model's answer to ``question`` over ``context`` and compute every signal for it."""
    inp = ContextInput(context, question)
    result = attributor.attribute(inp, target=None, granularity="sentence", gen_args=gen_args)
    assert result.head_selection is not None and result.groundedness is not None
    head_scores = result.head_selection.scores.double()
    example = attributor.prepare(inp, target=result.answer, granularity="sentence")
    return {
        "answer": result.answer,
        "rc_context_heads": float((head_scores > 0.5).double().mean()),
        "rc_superiority": float(head_scores.mean()),
        "rc_selected": float(head_scores[tuple(result.head_selection.heads.T)].mean()),
        "rc_groundedness": float(result.groundedness.double().mean()),
        **baseline_signals(attributor.model, example, result.head_selection.heads),
        "random": rng.random(),
    }


def auroc_table(
    rows: Sequence[dict[str, Any]], reference: str = "lookback", n_boot: int = 2000, seed: int = 0
) -> dict[str, dict[str, float]]:
    """Per signal, the AUROC of own (positive) against other, with a 95% bootstrap interval over questions
    (a resample keeps a question's two answers together), and its paired difference to ``reference``."""
    by_id: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_id.setdefault(row["id"], {})[row["condition"]] = row
    complete = [pair for pair in by_id.values() if set(pair) == set(CONDITIONS)]
    labels = np.array([1] * len(complete) + [0] * len(complete))
    draws = np.random.default_rng(seed).integers(0, len(complete), size=(n_boot, len(complete)))

    def aurocs(signal: str) -> tuple[float, np.ndarray]:
        own = np.array([pair["own"][signal] for pair in complete])
        other = np.array([pair["other"][signal] for pair in complete])
        resampled = [roc_auc_score(labels, np.concatenate([own[d], other[d]])) for d in draws]
        return float(roc_auc_score(labels, np.concatenate([own, other]))), np.array(resampled)

    base, base_draws = aurocs(reference)
    table: dict[str, dict[str, float]] = {}
    for signal in SIGNALS:
        value, resampled = (base, base_draws) if signal == reference else aurocs(signal)
        low, high = np.percentile(resampled, [2.5, 97.5])
        diff_low, diff_high = np.percentile(resampled - base_draws, [2.5, 97.5])
        table[signal] = {
            "auroc": value,
            "low": float(low),
            "high": float(high),
            f"minus_{reference}": value - base,
            "difference_low": float(diff_low),
            "difference_high": float(diff_high),
            "questions": len(complete),
        }
    return table


def markdown(table: dict[str, dict[str, float]], reference: str = "lookback") -> str:
    lines = [
        f"| signal | AUROC | 95% interval | minus {reference} (paired 95% interval) |",
        "|---|---:|---|---|",
        *(
            f"| {name} | {v['auroc']:.3f} | [{v['low']:.3f}, {v['high']:.3f}] | "
            f"{v[f'minus_{reference}']:+.3f} [{v['difference_low']:+.3f}, {v['difference_high']:+.3f}] |"
            for name, v in table.items()
        ),
    ]
    n = next(iter(table.values()))["questions"] if table else 0
    return (
        f"Context relevance, SQuAD v2 dev, {n} questions (own paragraph vs another article's)\n\n"
        + "\n".join(lines)
        + "\n"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.groundedness",
        description="Context relevance on SQuAD v2: AUROC of answer-level context-reliance signals (RC and baselines).",
    )
    parser.add_argument("--limit", type=int, default=200, help="answerable questions (default 200)")
    parser.add_argument(
        "--out", default="runs/groundedness", help="run folder (resumes; default runs/groundedness)"
    )
    parser.add_argument(
        "--model", default=None, help="model path or hub id (default: the offline default model)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=32, help="answer length cap (default 32)")
    parser.add_argument(
        "--seed", type=int, default=0, help="other-paragraph draw and random signal (default 0)"
    )
    args = parser.parse_args(argv)

    from rcattr.models import load_model

    torch.set_grad_enabled(False)
    model, tokenizer = load_model(args.model)
    attributor = RCAttributor(model, tokenizer)
    gen_args = {"max_new_tokens": args.max_new_tokens, "do_sample": False}
    store = RunStore(args.out, rows="records")
    store.claim({"model": args.model, "max_new_tokens": args.max_new_tokens, "seed": args.seed})
    pairs = relevance_pairs(args.limit, args.seed)
    keys = [f"{pair.id}:{condition}" for pair in pairs for condition in CONDITIONS]
    todo = set(store.todo("signals", keys, key=record_id))
    rng = random.Random(args.seed)
    with store.appending("signals") as write:
        for pair in tqdm(pairs, desc="questions"):
            for condition in CONDITIONS:
                key = f"{pair.id}:{condition}"
                draw = rng.random()  # drawn for every row, so a resumed run gives the same values
                if key not in todo:
                    continue
                context = pair.own if condition == "own" else pair.other
                row = answer_signals(attributor, context, pair.question, gen_args, random.Random(draw))
                write({"id": key, "question": pair.id, "condition": condition, **row})
    rows = [{**row, "id": row["question"]} for row in store.done("signals", keys, key=record_id).values()]
    table = auroc_table(rows, seed=args.seed)
    store.write_report({"context_relevance": table}, markdown(table))
    print(markdown(table))


if __name__ == "__main__":
    main()
