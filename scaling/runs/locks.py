"""Locks in the run store, so that two sweeps on one runs directory never train a run twice.

A lock is an flock on a lock file. The kernel releases an flock when its process ends, however
it ends, so a lock left behind by a killed sweep is no lock at all: the next sweep takes the run
over and resumes it from its checkpoint. The file holds its owner's pid and host, to say who is
busy with a run. flock excludes processes on one machine; over NFS it depends on the server, so
sweeps on two machines sharing a runs directory are not guaranteed to exclude each other.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scaling.errors import UsageError


class Lock:
    """A held lock; release() (or the end of the process) lets the next owner in."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd: int | None = fd   # None once released

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the file drops the flock
            self.fd = None


def _open(path: Path) -> int:
    """The lock file's descriptor. A symbolic link is refused, not followed: the lock file is
    truncated and written, and that must never reach a file outside the run store."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise UsageError(f"{path} is a symbolic link; a lock file of the run store must be a plain "
                         "file (remove the link and run again)") from None


def try_lock(path: Path) -> Lock | None:
    """Take the lock at `path` if no live process holds it, else None."""
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
    return Lock(Path(path), fd)


def owner(path: Path) -> str:
    """Who holds the lock at `path`, as its file says."""
    try:
        return Path(path).read_text().strip() or "another process"
    except OSError:
        return "another process"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the lock at `path` for a short critical section, waiting for it if need be."""
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
