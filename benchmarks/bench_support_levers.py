"""Which token-support recipe finds unsupported tokens best? The levers of issue 38, each against the default.

    python benchmarks/bench_support_levers.py --out runs/support-levers [--model gemma-3-270m] [--records 50]

On the unsupported-tokens benchmark's edited QuoteSum and Veri-Gran answers
(:mod:`rcattr.eval.groundedness.unsupported_tokens`), one pass per answer gives every head's P(max X > Y)
and the tokens' log-probabilities (:func:`~rcattr.attribution.head_statistics.token_statistics`);
each lever below changes one thing of the result's ``token_support`` (``default``: the log-probability,
the first token's left out, plus the log-odds of the mean smoothed peak over the 20 best heads by P(X > Y)).
Token AUROC with 95% intervals over records and the paired difference to the default. Rows are kept in
``OUT/records`` (the run resumes; ``--report-only`` re-renders).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch
from tqdm import tqdm

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.head_statistics import TokenStatistics, token_statistics
from rcattr.eval.attribution.method import context_input
from rcattr.eval.common.datasets import load_attribution
from rcattr.eval.common.run_args import run_folder
from rcattr.eval.common.run_store import RunStore, record_id
from rcattr.eval.common.sharding import Shard
from rcattr.eval.groundedness.answer_edits import edit_answers
from rcattr.eval.groundedness.unsupported_tokens import edited_token_kinds, markdown, token_auroc_table
from rcattr.grounding.support import support_heads, support_log_odds
from rcattr.heads.scores import top_heads


def _with_first(statistics: TokenStatistics, heads: torch.Tensor) -> torch.Tensor:
    """Support log-odds that keep the first token's log-probability."""
    kept = support_log_odds(
        statistics.logprob, statistics.peak[tuple(heads.T)], statistics.n_self[heads[:, 0]]
    )
    return kept + torch.cat(
        [statistics.logprob[:1].double(), torch.zeros(len(kept) - 1, dtype=torch.float64)]
    )


def _previous_row(statistics: TokenStatistics, heads: torch.Tensor) -> torch.Tensor:
    """Support log-odds with the peak of the row that predicts the token (the first token keeps its own)."""
    peak = statistics.peak[tuple(heads.T)]
    shifted = torch.cat([peak[:, :1], peak[:, :-1]], 1)
    return support_log_odds(statistics.logprob, shifted, statistics.n_self[heads[:, 0]])


def _mean_of_log_odds(statistics: TokenStatistics, heads: torch.Tensor) -> torch.Tensor:
    """Each head's smoothed peak in log-odds, averaged, instead of the log-odds of the mean peak."""
    per_head = [
        support_log_odds(statistics.logprob, statistics.peak[layer, head][None], statistics.n_self[[layer]])
        for layer, head in heads.tolist()
    ]
    return torch.stack(per_head).mean(0)


def every_head(scores: torch.Tensor) -> torch.Tensor:
    layers, heads = scores.shape
    return torch.cartesian_prod(torch.arange(layers), torch.arange(heads))


# name -> (minus the signal: higher is less supported) from the statistics, the head scores and the selected heads
LEVERS: dict[str, Callable[[TokenStatistics, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "default": lambda s, scores, selected: -s.support_log_odds(support_heads(scores)),
    "outlier heads (issue 20)": lambda s, scores, selected: -s.support_log_odds(selected),
    "30 best heads": lambda s, scores, selected: (
        -s.support_log_odds(top_heads(scores, min(30, scores.numel())))
    ),
    "every head": lambda s, scores, selected: -s.support_log_odds(every_head(scores)),
    "first token's log-probability kept": lambda s, scores, selected: -_with_first(s, support_heads(scores)),
    "peak of the previous row": lambda s, scores, selected: -_previous_row(s, support_heads(scores)),
    "mean of each head's log-odds": lambda s, scores, selected: -_mean_of_log_odds(s, support_heads(scores)),
    "peak alone (20 best heads)": lambda s, scores, selected: (
        1 - s.peak[tuple(support_heads(scores).T)].mean(0)
    ),
    "log-probability alone": lambda s, scores, selected: -s.logprob.double(),
    "log-probability alone, first token left out": lambda s, scores, selected: (
        -torch.cat([torch.zeros(1, dtype=torch.float64), s.logprob[1:].double()])
    ),
}


def lever_rows(attributor: RCAttributor, edited: Any) -> dict[str, Any]:
    """One edited answer's tokens, labels and every lever's per-token signal."""
    inp = context_input(edited.record)
    result = attributor.attribute(inp, target=edited.answer, granularity="sentence")
    assert result.head_selection is not None
    statistics = token_statistics(attributor.model, attributor.prepare(inp, target=edited.answer))
    scores, selected = result.head_selection.scores, result.head_selection.heads
    tokens = [(span.start, span.end) for span in result.answer_tokens]
    return {
        "id": edited.record.id,
        "tokens": [edited.answer[start:end] for start, end in tokens],
        "kinds": edited_token_kinds(edited, tokens),
        **{
            name: [round(float(v), 6) for v in lever(statistics, scores, selected)]
            for name, lever in LEVERS.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="runs/support-levers")
    parser.add_argument(
        "--model", default=None, help="model path or hub id (default: the offline default model)"
    )
    parser.add_argument("--records", type=int, default=None, help="records read per dataset (default all)")
    parser.add_argument("--datasets", nargs="+", default=["quotesum", "verigran"])
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    with run_folder(args.out, Shard(), args.report_only):
        store = RunStore(args.out, rows="records")
        store.claim({"model": args.model, "seed": 0, "max_edits": 2})
        attributor = None
        if not args.report_only:
            from rcattr.runtime.models import load_model

            torch.set_grad_enabled(False)
            attributor = RCAttributor(*load_model(args.model))
        tables = {}
        for dataset in args.datasets:
            edited = edit_answers(load_attribution(dataset, limit=args.records), 0, 2)
            keys = [e.record.id for e in edited]
            todo = set(store.todo(dataset, keys, key=record_id)) if attributor is not None else set()
            with store.appending(dataset) as write:
                for answer in tqdm(edited, desc=dataset, disable=not todo):
                    if attributor is not None and answer.record.id in todo:
                        write(lever_rows(attributor, answer))
            rows = list(store.done(dataset, keys, key=record_id).values())
            tables[dataset] = token_auroc_table(rows, reference="default", signals=list(LEVERS))
        report = markdown(tables, reference="default")
        store.write_report(tables, report)
        print(report)


if __name__ == "__main__":
    main()
