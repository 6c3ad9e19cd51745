"""One writer per run folder (and shard): a lock file that names its holder.

A process that writes a run's rows holds `OUT/.lock` (`OUT/.lock.shard-I-of-N` for shard `I/N`) with an
exclusive `flock` and keeps its pid, host, start time and command line in it. A second process on the same
folder refuses at once, naming the holder, when its shard shares a record with a live lock's shard (a whole
run shares every record; shards `0/2` and `1/2` none, so they write side by side). The kernel drops the
`flock` of a process that dies, however it dies: a lock file left by a dead process is taken over, with a
warning naming it. This module needs only the standard library, so a benchmark command takes its folder's
lock ([`command_lock`][rcattr.eval.common.run_lock.command_lock]) before it imports torch, loads its model or reads its data: a second run on the
folder is refused within a second, whatever the first is doing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path
from types import TracebackType
from typing import Any

from rcattr.eval.common.sharding import Shard

try:
    import fcntl
except ImportError:  # Windows has no flock: runs go unlocked there, with a warning (RunLock.acquire)
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)
LOCK_NAME = ".lock"
_command_lock: RunLock | None = None  # the one command_lock holds; run_folder_lock goes on with it


class RunLockedError(RuntimeError):
    """Another live process writes the run folder (or a shard sharing records with this one)."""


def lock_path(folder: Path, shard: Shard) -> Path:
    """The lock file of `shard`'s writes in `folder`."""
    return folder / (LOCK_NAME if shard.whole else f"{LOCK_NAME}.shard-{shard.index}-of-{shard.count}")


class RunLock:
    """The lock of `shard`'s writes in the run folder `folder`; a context manager.

    Examples
    --------
    >>> with RunLock(tmp_path, Shard()):  # doctest: +SKIP
    ...     ...  # a second RunLock(tmp_path, Shard()) raises RunLockedError here
    """

    def __init__(self, folder: str | Path, shard: Shard | None = None) -> None:
        self.folder = Path(folder)
        self.shard = shard or Shard()
        self.path = lock_path(self.folder, self.shard)
        self._handle: int | None = None

    def acquire(self) -> None:
        """Take the lock.

        Raises
        ------
        RunLockedError
            Naming the live process that holds this lock or one whose shard shares records with this one.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            handle = _lock_file(self.path)
        except OSError as error:  # a file system (some network and FUSE mounts) or a platform without flock
            logger.warning(
                "%s: this file system takes no locks (%s); running without one", self.folder, error
            )
            return
        if handle is None:
            raise RunLockedError(_held_message(self.path, self.folder))
        previous = _holder(self.path)
        if previous:
            logger.warning(
                "%s: taking over the lock of %s, which is no longer running", self.folder, _describe(previous)
            )
        os.ftruncate(handle, 0)
        os.pwrite(handle, json.dumps(_this_process(self.shard)).encode(), 0)
        self._handle = handle
        other = _live_lock(self.folder, self.shard, skip=self.path)
        if other is not None:
            self.release()
            raise RunLockedError(_held_message(other, self.folder))

    def release(self) -> None:
        """Give the lock back (and delete its file)."""
        if self._handle is None:
            return
        self.path.unlink(missing_ok=True)  # before the unlock: a process waiting on this file sees it is gone
        os.close(self._handle)
        self._handle = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()


def check_unlocked(folder: str | Path, shard: Shard | None = None) -> None:
    """Raise [`RunLockedError`][rcattr.eval.common.run_lock.RunLockedError] if a live process holds a lock of `folder` sharing records with
    `shard`; takes nothing ([`RunLock`][rcattr.eval.common.run_lock.RunLock] decides)."""
    folder = Path(folder)
    held = _live_lock(folder, shard or Shard()) if folder.is_dir() else None
    if held is not None:
        raise RunLockedError(_held_message(held, folder))


@contextmanager
def command_lock(argv: Sequence[str], default_out: str | None = None) -> Iterator[None]:
    """Hold the lock of the run folder that the `--out` (and `--shard`) of the benchmark command line
    `argv` name, from before the command's slow start (torch, the model, the data) to its end; a folder
    another live run writes ends the command at once with one line naming the holder.

    The command's [`rcattr.eval.common.run_args.run_folder`][rcattr.eval.common.run_args.run_folder] goes on with this lock
    ([`run_folder_lock`][rcattr.eval.common.run_lock.run_folder_lock]). Nothing is held with `--report-only` (it only reads), `--help`, no
    `--out`, or an `--out` or `--shard` the command's own checks refuse. A folder made here and still
    empty at the end (a command line its parser refused) is removed.
    """
    global _command_lock
    lock = _lock_of_command_line(argv, default_out)
    made = lock is not None and not lock.folder.exists()
    if lock is not None:
        try:
            lock.acquire()
        except RunLockedError as error:
            raise SystemExit(str(error)) from None
        except OSError:  # a folder that cannot be made: the command's run_folder says so
            pass
        else:
            _command_lock = lock
    try:
        yield
    finally:
        _command_lock = None
        if lock is not None:
            lock.release()
            if made:
                with suppress(OSError):
                    lock.folder.rmdir()  # only if still empty


def run_folder_lock(folder: Path, shard: Shard) -> AbstractContextManager[object]:
    """The lock of `shard`'s writes in `folder` for a command to hold while it runs: the one it took at
    its start ([`command_lock`][rcattr.eval.common.run_lock.command_lock]) when that names this folder and shard, else a new [`RunLock`][rcattr.eval.common.run_lock.RunLock]
    (after giving back a lock of the command's that names another, e.g. processes that split the run
    otherwise than the command line said)."""
    global _command_lock
    held = _command_lock
    if held is not None and held.path.resolve() == lock_path(folder, shard).resolve():
        return nullcontext(held)
    if held is not None:
        held.release()
        _command_lock = None
    return RunLock(folder, shard)


def _lock_of_command_line(argv: Sequence[str], default_out: str | None) -> RunLock | None:
    """The lock a command line's run writes under (None when it writes nothing or its parser will stop it)."""
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    parser.add_argument("--out", default=default_out)
    parser.add_argument("--shard")
    parser.add_argument("--report-only", action="store_true")
    try:
        args, rest = parser.parse_known_args(argv)
    except argparse.ArgumentError:
        return None
    if args.out is None or args.report_only or {"-h", "--help"} & set(rest):
        return None
    folder = Path(args.out)
    if folder.exists() and not folder.is_dir():
        return None
    try:
        requested = Shard.parse(args.shard) if args.shard else Shard()
    except ValueError:
        return None
    # under accelerate launch / torchrun, this process's part of the shard (Processes.start splits it so)
    shard = requested.split(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)))
    return RunLock(folder, shard)


def _live_lock(folder: Path, shard: Shard, skip: Path | None = None) -> Path | None:
    """The first lock file of `folder` (but `skip`) that a live process holds for a shard sharing records
    with `shard`, or None."""
    for path in sorted(folder.glob(f"{LOCK_NAME}*")):
        other = _lock_shard(path)
        if path != skip and other is not None and other.overlaps(shard) and _is_held(path):
            return path
    return None


def _lock_file(path: Path) -> int | None:
    """An open handle on `path` locked with an exclusive `flock` (None if another process holds it):
    retried when the holder deleted the file between our open and our lock, so the handle is on the file at
    `path`."""
    if fcntl is None:
        raise OSError("no flock on this platform")
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            return None
        try:
            if os.stat(path).st_ino == os.fstat(handle).st_ino:
                return handle
        except FileNotFoundError:
            pass
        os.close(handle)


def _is_held(path: Path) -> bool:
    """Whether a live process holds the lock file `path`."""
    if fcntl is None:
        return False
    try:
        handle = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(handle)
    return False


def _lock_shard(path: Path) -> Shard | None:
    """The shard a lock file's name stands for (None for a name that is not a lock's)."""
    if path.name == LOCK_NAME:
        return Shard()
    suffix = path.name.removeprefix(f"{LOCK_NAME}.shard-")
    index, _, count = suffix.partition("-of-")
    if suffix == path.name or not index.isdigit() or not count.isdigit():
        return None
    return Shard(int(index), int(count))


def _holder(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
        return dict(json.loads(text)) if text.strip() else {}
    except (OSError, ValueError, TypeError):
        return {}


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "another process (its lock file names none)"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("started", 0)))
    return (
        f"pid {holder.get('pid')} on {holder.get('host')} (shard {holder.get('shard')}, started {started}: "
        f"{holder.get('command')})"
    )


def _held_message(path: Path, folder: Path) -> str:
    return (
        f"{folder} is being written by {_describe(_holder(path))}; wait for it to finish, or use another --out "
        "(--report-only reads a folder in use)"
    )


def _this_process(shard: Shard) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "shard": str(shard),
        "started": time.time(),
        "command": " ".join(sys.argv),
    }
