"""The kvpress presses by name: each builds its press at the ratio asked for."""

from __future__ import annotations

from types import SimpleNamespace

from rcattr.eval.kv.presses import EAGER_PRESSES, PRESSES, TOKENIZER_PRESSES


class _Press:
    def __init__(self, press: object = None, **settings: object) -> None:
        self.inner, self.settings = press, settings


def test_every_press_builds_at_its_ratio_from_the_kvpress_module() -> None:
    kvpress = SimpleNamespace(**{name: type(name, (_Press,), {}) for name in _press_classes()})
    for name, make in PRESSES.items():
        press = make(kvpress, 0.25)
        settings = press.settings or press.inner.settings
        assert settings["compression_ratio"] == 0.25, name
    assert EAGER_PRESSES <= PRESSES.keys() and TOKENIZER_PRESSES <= PRESSES.keys()


def _press_classes() -> list[str]:
    """Every class name the table reads from kvpress."""
    import inspect
    import re

    from rcattr.eval.kv import presses

    source = inspect.getsource(presses)
    return sorted(set(re.findall(r"kvpress\.(\w+)\(", source)))
