"""Command lines run as a user runs them: ``python -m MODULE --help`` in a fresh interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys

PROBE = """
import contextlib, io, runpy, sys
sys.argv = [{module!r}, "--help"]
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
    runpy.run_module({module!r}, run_name="__main__")
print(out.getvalue())
print([name for name in ("torch", "transformers") if name in sys.modules])
"""


def command_help(module: str) -> tuple[str, list[str]]:
    """``python -m MODULE --help``'s output, and which of torch and transformers it imported (a benchmark's
    command line parses before either loads)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)], capture_output=True, text=True, check=True
    )
    text, _, heavy = done.stdout.rstrip().rpartition("\n")
    return text, ast.literal_eval(heavy)
