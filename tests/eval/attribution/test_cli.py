"""The attribution benchmark's command line (rcattr.eval.attribution.cli): unknown methods refused before any write."""

from __future__ import annotations

import pytest

from rcattr.eval.attribution import (
    main,
)


def test_cli_rejects_unknown_methods(saved_llama, quotesum_data) -> None:
    with pytest.raises(SystemExit, match="unknown method"):
        main(["--dataset", "quotesum", "--out", str(quotesum_data / "x"), "--methods", "rc,magic"])
    assert not (quotesum_data / "x").exists()  # refused before anything is written
