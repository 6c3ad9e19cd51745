"""A pytest plugin that writes what a collection selected: ``python -m pytest --collect-only -p
tests.helpers.selection -m EXPR`` writes ``{node id: {"selected": bool, "markers": [...]}}`` as JSON to the file
named by ``RCATTR_SELECTION_OUT``, every collected test included (the ones ``-m`` deselected too)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

_deselected: list[pytest.Item] = []


def pytest_deselected(items: list[pytest.Item]) -> None:
    _deselected.extend(items)


def _entry(item: pytest.Item, selected: bool) -> dict[str, object]:
    return {"selected": selected, "markers": sorted({marker.name for marker in item.iter_markers()})}


def pytest_collection_finish(session: pytest.Session) -> None:
    report = {item.nodeid: _entry(item, True) for item in session.items}
    report |= {item.nodeid: _entry(item, False) for item in _deselected}
    Path(os.environ["RCATTR_SELECTION_OUT"]).write_text(json.dumps(report))
