"""The command line's inputs and outputs, checked before any model work: the context file, the output paths."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rcattr.text.prompting import ContextInput


class CommandError(Exception):
    """A problem with the command's arguments or input files: reported in one line, exit status 2."""


def _read_context(path: str, encoding: str, by_blank_line: bool) -> str | list[str]:
    """The context file's text (or its blank-line-separated paragraphs), checked before any model work."""
    if path == "-":
        data, name = sys.stdin.buffer.read(), "standard input"
    else:
        file, name = Path(path), path
        if not file.exists():
            raise CommandError(f"--context: {path} does not exist")
        if file.is_dir():
            raise CommandError(f"--context: {path} is a directory; give a text file")
        try:
            data = file.read_bytes()
        except OSError as error:
            raise CommandError(f"--context: cannot read {path} ({error.strerror})") from None
    if b"\x00" in data:
        raise CommandError(f"--context: {name} is not a text file (it contains NUL bytes)")
    try:
        text = data.decode(encoding)
    except LookupError:
        raise CommandError(f"--encoding: unknown text encoding {encoding!r}") from None
    except UnicodeDecodeError as error:
        raise CommandError(
            f"--context: {name} is not {encoding} text (byte 0x{data[error.start]:02x} at offset {error.start}); "
            "give its encoding, e.g. --encoding latin-1"
        ) from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise CommandError(f"--context: {name} is empty")
    if not by_blank_line:
        return text
    return [part.strip() for part in text.replace("\r\n", "\n").split("\n\n") if part.strip()]


def image_suffixes() -> Collection[str]:
    from matplotlib.backend_bases import FigureCanvasBase

    return {f".{suffix}" for suffix in FigureCanvasBase.get_supported_filetypes()}


def html_suffixes() -> Collection[str]:
    from rcattr.options import HTML_SUFFIXES

    return HTML_SUFFIXES


def check_output(option: str, value: str | None, suffixes: Callable[[], Collection[str]], kind: str) -> None:
    """Refuse, before any model work, an output path that could not be written, or whose extension is
    not one of `suffixes()` (`kind` names what the file holds)."""
    if value is None:
        return
    path = Path(value)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise CommandError(f"{option}: {value} is a directory; give a file name")
    if not folder.is_dir():
        raise CommandError(f"{option}: the folder {folder} does not exist")
    allowed = suffixes()
    if path.suffix.lower() not in allowed:
        raise CommandError(
            f"{option}: cannot tell {kind} from {path.suffix or 'no extension'!r}; end the name "
            f"with one of {', '.join(sorted(allowed))}"
        )
    # real writes: permission bits do not stop root, and some folders (/proc) refuse new files anyway
    if path.exists():
        try:
            open(path, "ab").close()  # appends nothing
        except OSError as error:
            raise CommandError(f"{option}: cannot write {value} ({error.strerror or error})") from None
        return
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        raise CommandError(f"{option}: cannot write in the folder {folder}") from None


def read_input(args: argparse.Namespace) -> ContextInput:
    """The command's context and question (the demo's without `--context`), read and checked before torch is
    imported, and the given `--answer` checked."""
    answer = getattr(args, "answer", None)
    if answer is not None and not answer.strip():
        raise CommandError("--answer: the answer is empty; give the answer to explain, or leave --answer out")
    context = None
    if getattr(args, "context", None) is not None:
        context = _read_context(args.context, args.encoding, args.chunks_by_blank_line)
    from rcattr.demo import example_input
    from rcattr.text.prompting import ContextInput

    return example_input() if context is None else ContextInput(context, args.question)


def check_fits(args: argparse.Namespace, inp: ContextInput) -> None:
    """Refuse, with only the tokenizer and config loaded (not the weights), a prompt that fills the model's
    window, or a prompt and given `--answer` that exceed it, as the library would after the model's load."""
    from rcattr.runtime.models import load_tokenizer
    from rcattr.text.prompting import render_prompt

    tokenizer, window = load_tokenizer(args.model)
    if window is None:
        return
    prompt = render_prompt(tokenizer, inp)
    tokens = len(tokenizer(prompt.text, add_special_tokens=prompt.add_special_tokens)["input_ids"])
    if tokens >= window:
        raise CommandError(
            f"--context: the prompt ({tokens} tokens) leaves no room for an answer in the model's window of "
            f"{window} positions; shorten the context"
        )
    answer = getattr(args, "answer", None)
    total = tokens + (0 if answer is None else len(tokenizer(answer, add_special_tokens=False)["input_ids"]))
    if total > window:
        raise CommandError(
            f"--answer: prompt ({tokens} tokens) + answer ({total - tokens} tokens) = {total} tokens exceeds the "
            f"model's window of {window} positions"
        )
