"""One writer per run folder and shard: a second writer refuses at once naming the holder, shards that share
no record write side by side, a lock left by a dead process is taken over with a warning, and a command holds
its folder from its start (before torch loads) to its end."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import subprocess
import sys
import time

import pytest

from rcattr.eval.common.run_lock import (
    RunLock,
    RunLockedError,
    check_unlocked,
    command_lock,
    lock_path,
    run_folder_lock,
)
from rcattr.eval.common.sharding import Shard


def test_a_second_writer_is_refused_naming_the_holder_until_the_first_is_done(tmp_path) -> None:
    with RunLock(tmp_path) as first:
        holder = json.loads(first.path.read_text())
        assert holder["pid"] == os.getpid() and holder["shard"] == "0/1"
        with pytest.raises(RunLockedError, match=rf"is being written by pid {os.getpid()} on "):
            RunLock(tmp_path).acquire()
        with pytest.raises(RunLockedError):
            check_unlocked(tmp_path)
    assert not first.path.exists()
    check_unlocked(tmp_path)
    with RunLock(tmp_path):  # free again
        pass


@pytest.mark.parametrize(
    ("held", "wanted", "refused"),
    [
        (Shard(0, 2), Shard(1, 2), False),
        (Shard(0, 2), Shard(), True),
        (Shard(), Shard(1, 2), True),
        (Shard(0, 2), Shard(2, 4), True),  # record 2 is in both
        (Shard(0, 2), Shard(1, 4), False),
        (Shard(1, 3), Shard(1, 3), True),
    ],
)
def test_shards_sharing_no_record_write_side_by_side(tmp_path, held, wanted, refused) -> None:
    assert held.overlaps(wanted) == refused
    with RunLock(tmp_path, held):
        if refused:
            with pytest.raises(RunLockedError, match=f"shard {held}"):
                RunLock(tmp_path, wanted).acquire()
            assert held == wanted or not lock_path(tmp_path, wanted).exists()  # a refusal leaves nothing
        else:
            with RunLock(tmp_path, wanted):
                pass


def test_a_lock_left_by_a_dead_process_is_taken_over_with_a_warning(tmp_path, caplog) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = {
        "pid": int(dead.stdout),
        "host": "elsewhere",
        "shard": "0/1",
        "started": 0,
        "command": "killed run",
    }
    lock_path(tmp_path, Shard()).write_text(json.dumps(stale))
    check_unlocked(tmp_path)  # no live holder
    with caplog.at_level(logging.WARNING), RunLock(tmp_path):
        pass
    [warning] = [record.getMessage() for record in caplog.records]
    assert f"taking over the lock of pid {stale['pid']} on elsewhere" in warning and "killed run" in warning


def test_a_lock_held_by_another_process_is_seen_and_dropped_when_it_is_killed(tmp_path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from rcattr.eval.common.run_lock import RunLock; "
            f"RunLock({str(tmp_path)!r}).acquire(); print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(SystemExit, match=f"pid {holder.pid} on "), command_lock(["--out", str(tmp_path)]):
            pass
        with command_lock(["--out", str(tmp_path), "--report-only"]):  # reading a folder in use is allowed
            pass
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the kernel drops a dead process's lock
        try:
            check_unlocked(tmp_path)
            break
        except RunLockedError:
            time.sleep(0.05)
    with RunLock(tmp_path):
        pass


def test_a_command_holds_its_folder_from_its_start_and_its_run_goes_on_with_that_lock(tmp_path) -> None:
    out = tmp_path / "run"
    with command_lock(["--dataset", "quotesum", "--out", str(out)]):
        assert json.loads(lock_path(out, Shard()).read_text())["pid"] == os.getpid()
        with pytest.raises(RunLockedError):
            RunLock(out).acquire()
        with run_folder_lock(out, Shard()):  # the command's own lock: not refused
            assert lock_path(out, Shard()).exists()
        with run_folder_lock(out, Shard(1, 2)):  # the run split otherwise than the command line said
            assert sorted(path.name for path in out.iterdir()) == [".lock.shard-1-of-2"]
    assert not out.exists()  # made by the command and left empty (e.g. its parser refused it): removed
    out.mkdir()
    with command_lock(["--out", str(out)]):
        pass
    assert out.is_dir() and not any(out.iterdir())  # there before: kept


def test_a_command_locks_its_process_share_of_its_shard(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")  # the second of two processes of accelerate launch
    with command_lock(["--out", str(tmp_path), "--shard", "1/3"]):
        assert [path.name for path in tmp_path.iterdir()] == [".lock.shard-4-of-6"]


@pytest.mark.parametrize(
    "arguments",
    [["--report-only"], ["--help"], ["--shard", "3/2"], ["--shard"], ["--out", "{file}"]],
    ids=["report-only", "help", "bad-shard", "shard-without-value", "out-a-file"],
)
def test_a_command_that_writes_nothing_or_that_its_parser_stops_takes_no_lock(tmp_path, arguments) -> None:
    out, file = tmp_path / "run", tmp_path / "file"
    file.write_text("")
    argv = ["--out", str(out), *(argument.format(file=file) for argument in arguments)]
    with command_lock(argv):
        assert not out.exists() and file.read_text() == ""


def test_a_file_system_without_locks_runs_unlocked_with_a_warning(tmp_path, monkeypatch, caplog) -> None:
    def no_locks(handle: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with caplog.at_level(logging.WARNING), RunLock(tmp_path):
        pass
    assert (
        "this file system takes no locks ([Errno 37] No locks available); running without one" in caplog.text
    )


def test_a_platform_without_flock_runs_unlocked_with_a_warning(tmp_path, monkeypatch, caplog) -> None:
    from rcattr.eval.common import run_lock

    monkeypatch.setattr(run_lock, "fcntl", None)
    with caplog.at_level(logging.WARNING), RunLock(tmp_path):
        check_unlocked(tmp_path)
    assert "takes no locks (no flock on this platform); running without one" in caplog.text
