"""``rcattr serve``'s command (rcattr.cli.serve_command): its usage errors and what it needs installed."""

from __future__ import annotations

import os
import sys

import pytest

from rcattr.cli import main


def test_bad_limits_are_usage_errors(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--queue-size", "0"])
    assert exit_info.value.code == 2 and "--queue-size" in capsys.readouterr().err


def test_without_fastapi_the_command_says_what_to_install(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    assert main(["serve"]) == 2
    assert "pip install 'rcattr[serve]'" in capsys.readouterr().err
    assert os.environ.get("RCATTR_TRACEBACK") is None
