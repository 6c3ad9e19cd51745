"""`python -m rcattr.eval.kv.distill`: fit a distilled eviction score ([`ScorePredictor`][rcattr.kvcache.distilled.ScorePredictor])
for a model, report how well it ranks held-out contexts' keys, and save it.

1. Plain prose contexts (`texts`), the last `--held-out` of them set aside.
2. Each context's replay scores and attention inputs (`teacher`), saved under `OUT/teacher/` as they
   come, so that a stopped run resumes where it stopped.
3. Per evicting layer, ridge statistics by fold of whole contexts; the penalty of each layer chosen by
   cross-validation over those folds (`ridge`), then the map fitted on every fitting context.
4. On the held-out contexts, each layer's rank correlation with the teacher and the share of the teacher's kept
   set it keeps at 50%, 75% and 87.5% (`evaluate`); a learning curve over the first 2, 4, 8, ... fitting
   contexts. `OUT/results.json`, `OUT/results.md` and the predictor, `OUT/predictor.safetensors`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from rcattr.eval.kv.distill.evaluate import RATIOS, kept_overlap, spearman
from rcattr.eval.kv.distill.ridge import PENALTIES, RidgeStatistics, choose_penalty
from rcattr.eval.kv.distill.teacher import FLOOR, TeacherScores, replay_teacher
from rcattr.eval.kv.distill.texts import FittingText, fitting_texts
from rcattr.kvcache.distilled import ScorePredictor, predictor_identity

__all__ = ["fit_predictor", "main"]

TEACHER = (
    "replay+softmax: KVzip's max attention weight over a replay's queries and the query heads of a key head"
)


def _teacher(model: Any, tokenizer: Any, texts: list[FittingText], folder: Path) -> list[Path]:
    """Each text's teacher file, computed where it is missing."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{text.id}.pt" for text in texts]
    missing = [(text, path) for text, path in zip(texts, paths, strict=True) if not path.exists()]
    for text, path in tqdm(missing, desc="replay scores", unit="context"):
        scores = replay_teacher(model, tokenizer, text.text)
        torch.save({"hidden": scores.hidden, "target": scores.target}, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").rename(path)
    return paths


def _load(path: Path) -> TeacherScores:
    stored = torch.load(path, weights_only=True)
    return TeacherScores(stored["hidden"], stored["target"])


def _curve_sizes(count: int) -> list[int]:
    sizes, size = [], 2
    while size < count:
        sizes.append(size)
        size *= 2
    return [*sizes, count]


def _held_out_scores(
    maps: dict[int, tuple[torch.Tensor, torch.Tensor]], held_out: list[TeacherScores]
) -> dict[str, Any]:
    """Per layer, the mean over held-out contexts and key heads of the rank correlation and kept overlaps."""
    per_layer: dict[str, Any] = {}
    for layer, (weight, bias) in maps.items():
        rows = []
        for scores in held_out:
            predicted = (scores.hidden[layer].double() @ weight + bias).T  # [Hkv, n]
            target = scores.target[layer].double()
            rows.append(
                [float(spearman(predicted, target).mean())]
                + [float(kept_overlap(predicted, target, ratio).mean()) for ratio in RATIOS]
            )
        means = torch.tensor(rows).mean(0).tolist()
        per_layer[str(layer)] = {"spearman": means[0]} | {
            f"kept_{ratio:g}": value for ratio, value in zip(RATIOS, means[1:], strict=True)
        }
    return per_layer


def _mean(per_layer: dict[str, Any], key: str) -> float:
    return sum(row[key] for row in per_layer.values()) / len(per_layer)


def fit_predictor(
    fitting: list[Path], held_out: list[Path], folds: int, identity: dict[str, Any], info: dict[str, Any]
) -> tuple[ScorePredictor, dict[str, Any]]:
    """The predictor fitted on the `fitting` teacher files (penalties by cross-validation over `folds` folds
    of whole contexts) and its scores on the `held_out` files, with the learning curve."""
    if len(fitting) < max(2, folds):
        raise ValueError(f"{len(fitting)} fitting contexts cannot make {folds} folds")
    held = [_load(path) for path in tqdm(held_out, desc="held-out contexts", unit="context")]
    fold_statistics: dict[int, list[RidgeStatistics]] = {}
    curve_sizes, curve = _curve_sizes(len(fitting)), []
    prefix: dict[int, RidgeStatistics] = {}
    penalties: dict[int, float] = {}
    for index, path in enumerate(tqdm(fitting, desc="ridge statistics", unit="context")):
        scores = _load(path)
        for layer, hidden in scores.hidden.items():
            target = scores.target[layer].T  # [n, Hkv]
            if layer not in fold_statistics:
                fold_statistics[layer] = [
                    RidgeStatistics.empty(hidden.shape[1], target.shape[1]) for _ in range(folds)
                ]
                prefix[layer] = RidgeStatistics.empty(hidden.shape[1], target.shape[1])
            fold_statistics[layer][index % folds].add(hidden, target)
            prefix[layer].add(hidden, target)
        if index + 1 in curve_sizes and index + 1 < len(fitting) and index + 1 >= folds:
            maps = {layer: statistics.solve(PENALTIES[2]) for layer, statistics in prefix.items()}
            curve.append({"contexts": index + 1, "spearman": _mean(_held_out_scores(maps, held), "spearman")})
    for layer, layer_folds in fold_statistics.items():
        penalties[layer] = choose_penalty(layer_folds)
    maps = {layer: prefix[layer].solve(penalties[layer]) for layer in prefix}
    per_layer = _held_out_scores(maps, held)
    curve.append({"contexts": len(fitting), "spearman": _mean(per_layer, "spearman")})
    summary = {"spearman": _mean(per_layer, "spearman")} | {
        f"kept_{ratio:g}": _mean(per_layer, f"kept_{ratio:g}") for ratio in RATIOS
    }
    results = {
        **info,
        "penalties": {str(layer): value for layer, value in penalties.items()},
        "held_out": summary,
        "per_layer": per_layer,
        "learning_curve": curve,
    }
    predictor = ScorePredictor(
        identity,
        {layer: weight.float() for layer, (weight, _) in maps.items()},
        {layer: bias.float() for layer, (_, bias) in maps.items()},
        {
            key: results[key]
            for key in ("teacher", "contexts", "held_out_contexts", "context_tokens", "held_out")
        },
    )
    return predictor, results


def results_markdown(results: dict[str, Any]) -> str:
    """The report of a fit: the summary, the learning curve and the per-layer table."""
    summary = results["held_out"]
    lines = [
        f"# Distilled eviction score: {results['identity']['model']}",
        "",
        f"Teacher: {results['teacher']}. Fitted on {len(results['contexts'])} contexts of up to "
        f"{results['context_tokens']} tokens, scored on {len(results['held_out_contexts'])} held-out ones; "
        "per layer a ridge map from the attention input to the log replay score of each key head, its penalty "
        f"chosen by {results['folds']}-fold cross-validation over whole contexts.",
        "",
        "| held out | rank correlation | kept of the teacher's at 50% | at 75% | at 87.5% |",
        "|---|---:|---:|---:|---:|",
        f"| mean over layers and key heads | {summary['spearman']:.3f} | {summary['kept_0.5']:.3f} | "
        f"{summary['kept_0.75']:.3f} | {summary['kept_0.875']:.3f} |",
        "| chance | 0 | 0.500 | 0.250 | 0.125 |",
        "",
        "Learning curve (held-out rank correlation, the map fitted on the first contexts, penalty "
        f"{PENALTIES[2]:g} until the last row):",
        "",
        "| fitting contexts | rank correlation |",
        "|---:|---:|",
        *[f"| {row['contexts']} | {row['spearman']:.3f} |" for row in results["learning_curve"]],
        "",
        "| layer | penalty | rank correlation | kept at 50% | at 75% | at 87.5% |",
        "|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {layer} | {results['penalties'][layer]:g} | {row['spearman']:.3f} | {row['kept_0.5']:.3f} | "
            f"{row['kept_0.75']:.3f} | {row['kept_0.875']:.3f} |"
            for layer, row in results["per_layer"].items()
        ],
        "",
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.kv.distill",
        description="Fit a distilled eviction score for a model: per layer, a ridge map from the attention input "
        "to KVzip's replay score, fitted on plain prose from data/ (SQuAD v2, QMSum, QuoteSum). Resumable: the "
        "replay scores are saved under OUT/teacher/ as they come.",
    )
    parser.add_argument(
        "--model", default=None, help="model name or path (default: the offline SmolLM2-135M-Instruct)"
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="folder of the teacher files, results and predictor"
    )
    parser.add_argument("--contexts", type=int, default=40, help="fitting contexts (default 40)")
    parser.add_argument(
        "--held-out", type=int, default=8, help="held-out contexts scored after the fit (default 8)"
    )
    parser.add_argument("--context-tokens", type=int, default=1024, help="tokens per context (default 1024)")
    parser.add_argument(
        "--folds", type=int, default=5, help="cross-validation folds of whole contexts (default 5)"
    )
    parser.add_argument("--save", type=Path, default=None, help="also copy the predictor to this path")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.contexts < max(2, args.folds) or args.held_out < 1:
        raise SystemExit("--contexts must be at least --folds (and 2), --held-out at least 1")
    from rcattr import load_model

    torch.set_grad_enabled(False)
    model, tokenizer = load_model(args.model)
    texts = fitting_texts(
        lambda text: len(tokenizer.encode(text, add_special_tokens=False)),
        args.context_tokens,
        args.contexts + args.held_out,
    )
    if len(texts) < args.contexts + args.held_out:
        raise SystemExit(
            f"data/ gives {len(texts)} contexts of {args.context_tokens} tokens, fewer than asked"
        )
    paths = _teacher(model, tokenizer, texts, args.out / "teacher")
    fitting, held_out = paths[: args.contexts], paths[args.contexts :]
    identity = predictor_identity(model)
    info = {
        "identity": identity,
        "teacher": TEACHER,
        "floor": FLOOR,
        "contexts": [text.id for text in texts[: args.contexts]],
        "held_out_contexts": [text.id for text in texts[args.contexts :]],
        "context_tokens": args.context_tokens,
        "folds": args.folds,
    }
    predictor, results = fit_predictor(fitting, held_out, args.folds, identity, info)
    predictor.save(args.out / "predictor.safetensors")
    if args.save is not None:
        predictor.save(args.save)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    report = results_markdown(results)
    (args.out / "results.md").write_text(report)
    print(report)
