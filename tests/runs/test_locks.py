"""scaling.runs.locks: one owner at a time, released when its holder lets go, and never a write
through a symbolic link."""

import os

import pytest

from scaling.errors import UsageError
from scaling.runs import locks


def test_a_held_lock_excludes_a_second_taker_until_released(tmp_path):
    path = tmp_path / ".lock"
    first = locks.try_lock(path)
    assert first is not None
    assert locks.try_lock(path) is None            # flock on a second descriptor is refused
    assert locks.owner(path) == f"pid {os.getpid()} on {os.uname().nodename}"
    first.release()
    second = locks.try_lock(path)
    assert second is not None
    second.release()


def test_a_symlinked_lock_is_refused_and_its_target_left_alone(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's file\n")
    store = tmp_path / "runs"
    store.mkdir()
    (store / ".lock").symlink_to(outside)
    with pytest.raises(UsageError, match="symbolic link"):
        locks.try_lock(store / ".lock")
    with pytest.raises(UsageError, match="symbolic link"):
        with locks.locked(store / ".lock"):
            pass
    assert outside.read_text() == "the user's file\n"
