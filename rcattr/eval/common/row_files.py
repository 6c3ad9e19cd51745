"""JSON-lines files of rows that survive a run killed mid-write.

Each row is appended with one `write` system call of the whole line, newline included, on a file opened
for appending: a process killed at any point leaves every earlier row whole and at most one partial line
at the end. Readers leave such a trailing line out (it is a row still being written, or the remains of a
killed one); the next writer of the file moves it aside, to `FILE.partial`, before appending, and says so.
Any other line that is not a JSON object is an error naming the file and the line.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Row = dict[str, Any]
logger = logging.getLogger(__name__)


class RowFileError(ValueError):
    """A file of rows holds a line that is not a row (not one a killed run can leave)."""


def parse_rows(path: Path) -> Iterator[Row]:
    """The rows of one JSON-lines file (gzipped if its name ends in `.gz`), a partial last line left out.

    Raises
    ------
    RowFileError
        Naming the file and the line of the first complete line that is not a JSON object.
    """
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    lines = data.split(b"\n")
    lines.pop()  # the part after the last newline: empty, or a row not written whole
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise RowFileError(
                f"{path}, line {number}: not a JSON row ({error}); a killed run leaves at most a partial last "
                "line, so this file was changed by hand or by another program: fix or delete that line"
            ) from None
        if not isinstance(row, dict):
            raise RowFileError(f"{path}, line {number}: a row is a JSON object, got {type(row).__name__}")
        yield row


def set_aside_partial_line(path: Path) -> bytes:
    """Move the partial last line of `path` (bytes after its last newline, left by a killed writer) to the
    end of `PATH.partial` and cut it from `path`; returns those bytes (empty when the file ends whole)."""
    if not path.exists():
        return b""
    with open(path, "rb+") as file:
        size = file.seek(0, os.SEEK_END)
        end = _end_of_last_line(file, size)
        if end == size:
            return b""
        file.seek(end)
        partial = file.read()
        with open(path.with_name(path.name + ".partial"), "ab") as aside:
            aside.write(partial + b"\n")
        file.truncate(end)
    logger.warning(
        "%s ended with a partial row (a run killed while writing it): moved it to %s.partial; its record runs "
        "again",
        path,
        path.name,
    )
    return partial


def _end_of_last_line(file: Any, size: int, block: int = 1 << 16) -> int:
    """The offset just after the last newline of an open binary file of `size` bytes (0 if it has none)."""
    position = size
    while position > 0:
        start = max(0, position - block)
        file.seek(start)
        newline = file.read(position - start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        position = start
    return 0


@contextmanager
def appending_rows(path: Path) -> Iterator[Callable[[Row], None]]:
    """A function that appends a row to `path` as one line in one system call (a partial last line left by a
    killed writer is set aside first): a run killed at any point keeps every row it wrote whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    set_aside_partial_line(path)
    handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(row: Row) -> None:
        line = (json.dumps(row) + "\n").encode()
        written = os.write(handle, line)
        while written < len(line):  # a short write (a full disk, a signal): the rest goes on the same line
            written += os.write(handle, line[written:])

    try:
        yield write
    finally:
        os.close(handle)
