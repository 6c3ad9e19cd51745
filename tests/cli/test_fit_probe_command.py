"""``rcattr fit-probe`` (rcattr.cli.fit_probe_command): a probe fitted on labelled claims with a saved model, used
by ``rcattr explain --probe``, and bad claims files refused in one line."""

from __future__ import annotations

import json

import pytest

from rcattr.cli import main
from rcattr.cli.fit_probe_command import read_claims
from rcattr.cli.inputs import CommandError
from rcattr.grounding.probe import SupportProbe

CLAIMS = [
    {"question": f"q{i}", "claim": claim, "references": ["The cat sat on the mat in 1971."], "label": label}
    for i, (claim, label) in enumerate(
        [("The cat sat.", 1), ("It sat in 1971.", 1), ("A dog ran.", 0), ("It was 1990.", 0)] * 3
    )
]


def _write(tmp_path, rows, name="claims.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_fit_probe_writes_a_probe_that_explain_uses(saved_llama, tmp_path, capsys) -> None:
    claims, out = _write(tmp_path, CLAIMS), tmp_path / "probe.json"
    assert main(["fit-probe", str(claims), "--out", str(out), "--model", str(saved_llama)]) == 0
    probe = SupportProbe.load(out)
    assert (
        set(probe.cuts) == {"lenient", "balanced", "strict"}
        and "fitted on 12 claims" in capsys.readouterr().out
    )
    context = tmp_path / "context.txt"
    context.write_text("The cat sat on the mat in 1971.", encoding="utf-8")
    argv = ["explain", "--context", str(context), "--answer", "It sat in 1974.", "--model", str(saved_llama)]
    assert main([*argv, "--probe", str(out)]) == 0
    assert (
        "(not in the documents: '1974'): 'It sat in 1974.'" in capsys.readouterr().out
    )  # the probe's verdict


def test_bad_claims_files_are_refused_naming_the_line(tmp_path) -> None:
    assert [c.label for c in read_claims(_write(tmp_path, CLAIMS))][:4] == [1, 1, 0, 0]
    bench = [{**row, "attribution_label": "not attributable"} for row in CLAIMS[:1]]
    del bench[0]["label"]
    assert read_claims(_write(tmp_path, [*CLAIMS[:1], *bench], "bench.jsonl"))[1].label == 0
    with pytest.raises(CommandError, match="line 2: give claim, references"):
        read_claims(_write(tmp_path, [CLAIMS[0], {"claim": "x", "label": 1}], "bad.jsonl"))
    with pytest.raises(CommandError, match="both labels"):
        read_claims(_write(tmp_path, CLAIMS[:2], "one.jsonl"))
    with pytest.raises(CommandError, match="no such claims file"):
        read_claims(tmp_path / "missing.jsonl")
