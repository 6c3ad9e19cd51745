"""Command line: `rcattr explain`, `heads`, `compress`, `ask`, `serve` and `demo` (or `python -m rcattr
...`)."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Sequence

from rcattr.cli.arguments import build_parser
from rcattr.cli.commands import COMMANDS, report
from rcattr.cli.inputs import (
    CommandError,
    check_fits,
    check_output,
    html_suffixes,
    image_suffixes,
    read_input,
)

__all__ = ["main", "report"]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    prog = f"rcattr {args.command}"
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning(prog)
        try:
            if args.command == "serve":  # no input: requests bring theirs
                from rcattr.cli.serve_command import serve

                return serve(args)
            if args.command == "ask":  # no input: the saved context is it
                from rcattr.cli.ask_command import ask

                return ask(args)
            if args.command == "fit-probe":  # its input: the claims file
                from rcattr.cli.fit_probe_command import fit_probe

                return fit_probe(args)
            check_output("--html", getattr(args, "html", None), html_suffixes, "an HTML page")
            for option in ("out", "heatmap"):
                check_output(f"--{option}", getattr(args, option, None), image_suffixes, "an image format")
            inp = read_input(args)
            check_fits(args, inp)
            return COMMANDS[args.command](args, inp)
        except CommandError as error:
            return _fail(prog, error, status=2)
        except (ValueError, TypeError, OSError, ImportError, NotImplementedError) as error:
            return _fail(prog, error, status=1)


def _fail(prog: str, error: Exception, status: int) -> int:
    if os.environ.get("RCATTR_TRACEBACK"):
        raise error
    print(f"{prog}: error: {error}", file=sys.stderr)
    return status


def _one_line_warning(prog: str) -> Callable[..., None]:
    def show(message: Warning | str, *args: object, **kwargs: object) -> None:
        print(f"{prog}: warning: {message}", file=sys.stderr)

    return show
