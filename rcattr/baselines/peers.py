"""The field's own packages, imported on demand: `context-cite` and `at2` (`pip install "rcattr[peers]"`)."""

from __future__ import annotations

import importlib
from typing import Any
from unittest import mock

PEER_PACKAGES = {"context_cite": "context-cite==0.0.4", "at2": "at2==0.0.1"}


def import_peer(module: str) -> Any:
    """Import `module` (a key of [`PEER_PACKAGES`][rcattr.baselines.peers.PEER_PACKAGES]), or raise ImportError saying how to install it.

    Both packages call `nltk.download("punkt_tab")` when imported, for a sentence splitter rcattr never
    calls (it gives them its own spans); offline that download fails with a message, so it is skipped.
    """
    try:
        import nltk

        with mock.patch.object(nltk, "download", return_value=True):
            return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f'{module} is not installed: pip install "rcattr[peers]" (or {PEER_PACKAGES.get(module, module)!r})'
        ) from error
