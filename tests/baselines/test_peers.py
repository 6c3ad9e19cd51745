"""The peer packages' import (rcattr.baselines.peers)."""

from __future__ import annotations

import pytest

from rcattr.baselines.peers import import_peer


def test_a_missing_peer_package_says_how_to_install_it() -> None:
    with pytest.raises(ImportError, match=r"rcattr\[peers\]"):
        import_peer("not_a_peer_package")
