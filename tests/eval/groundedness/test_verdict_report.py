"""The verdict's report on AttributionBench rows (rcattr.eval.groundedness.verdict_report): every fold's probe
and cut see only its training questions, the veto, and the tables' shapes."""

from __future__ import annotations

import numpy as np

from rcattr.eval.common.auroc import auroc
from rcattr.eval.groundedness import verdict_report
from rcattr.eval.groundedness.verdict_report import (
    held_out_sources,
    learning_curve,
    nested_verdicts,
    signal_table,
    stability,
)
from rcattr.grounding.probe import COMBINED, OPERATING_POINTS
from tests.helpers.claims import synthetic_claims

N = 80
GROUPS = [f"q{i // 2}" for i in range(N)]
SOURCES = ["a" if i < N // 2 else "b" for i in range(N)]


def test_each_folds_probe_sees_only_its_training_questions(monkeypatch) -> None:
    claims, labels = synthetic_claims(N, 0)
    seen: list[set[str]] = []
    fit = verdict_report.SupportProbe.fit

    def spy(train, train_labels, model, c, train_groups, seed):
        seen.append(set(train_groups))
        return fit(train, train_labels, model, c, train_groups, seed)

    monkeypatch.setattr(verdict_report.SupportProbe, "fit", spy)
    out = nested_verdicts(claims, labels, GROUPS, seed=0)
    assert len(seen) == verdict_report.FOLDS
    tested = [set(GROUPS) - fitted for fitted in seen]
    assert set().union(*tested) == set(GROUPS) and sum(map(len, tested)) == len(set(GROUPS))  # each once
    assert auroc(labels, out["probe"]) > 0.8
    for point in OPERATING_POINTS:
        marked = out[f"marked_{point}"]
        assert marked[[claim.unheld_number for claim in claims]].all()  # the veto


def test_the_tables_compare_every_signal_with_coverage() -> None:
    claims, labels = synthetic_claims(N, 2)
    values = {"coverage": np.array([c.coverage for c in claims]), "verdict": np.linspace(0, 1, N)}
    table = signal_table(values, {"verdict_balanced": values["verdict"] < 0.5}, labels, GROUPS, 50, 0)
    assert table["coverage"]["minus_coverage"] == 0.0 and "minus_coverage" in table["verdict"]
    assert {"macro_f1", "caught", "falsely_marked", "caught_low"} <= set(table["verdict_balanced"])
    held = held_out_sources(claims, labels, GROUPS, SOURCES, 0)
    assert set(held) == {"a", "b"} and held["a"]["claims"] == N // 2
    assert set(learning_curve(claims, labels, GROUPS, 0)) == {"0.25", "0.50", "0.75", "1.00"}
    spread = stability(claims, labels, GROUPS, SOURCES, 0, n_refits=2)
    assert set(spread["coefficients"]) == set(COMBINED) and set(spread["held_out_auroc"]) == {"a", "b"}
