"""The KV benchmark's command line (rcattr.eval.kv.cli): unknown methods and a missing kvpress are clear errors."""

from __future__ import annotations

import sys

import pytest

from rcattr.eval.kv import main
from rcattr.eval.kv.methods import (
    import_kvpress,
)


def test_unknown_methods_and_a_missing_kvpress_are_clear_errors(data, monkeypatch) -> None:
    with pytest.raises(SystemExit, match="unknown method.*choose from rc, snapkv"):
        main(["--dataset", "squad", "--out", str(data / "x"), "--methods", "rc,h2o"])
    monkeypatch.setitem(sys.modules, "kvpress", None)  # import kvpress now fails
    with pytest.raises(ImportError, match="make setup-kvpress"):
        import_kvpress()
    with pytest.raises(SystemExit, match="kvpress is not installed"):
        main(["--dataset", "squad", "--out", str(data / "x"), "--methods", "snapkv"])
