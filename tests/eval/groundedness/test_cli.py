"""The groundedness benchmark's command line: its defaults and the counts it refuses, parsed without torch."""

from __future__ import annotations

import pytest

from rcattr.eval.groundedness.cli import _parser


def test_the_run_folder_has_a_default_and_counts_are_checked() -> None:
    args = _parser().parse_args([])
    assert args.out == "runs/groundedness" and args.model is None and not args.report_only
    with pytest.raises(SystemExit):
        _parser().parse_args(["--limit", "0"])
