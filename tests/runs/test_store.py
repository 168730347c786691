"""scaling.runs.store's file primitives: atomic writes with ordinary permissions, and a temp-file
cleanup that takes only its own files."""

import os
import stat
import subprocess
import sys

from scaling.runs import store


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_writes_get_the_permissions_of_a_plainly_written_file(tmp_path):
    store.write_atomic(tmp_path / "summary.json", "{}\n")
    (tmp_path / "plain.txt").write_text("x")           # open(): 0666 less the umask
    assert mode(tmp_path / "summary.json") == mode(tmp_path / "plain.txt")


def test_atomic_writes_follow_the_umask_of_the_process(tmp_path):
    # A fresh process under umask 027: group may read, others may not.
    code = ("import os; os.umask(0o027)\nfrom scaling.runs import store\n"
            f"store.write_atomic({str(tmp_path / 'fit.json')!r}, 'x')")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert mode(tmp_path / "fit.json") == 0o640


def test_remove_temps_leaves_a_users_own_tmp_files(tmp_path):
    ours = tmp_path / f".summary.json.abc123{store.TEMP_SUFFIX}"   # as a killed write_atomic leaves it
    ours.write_text("half a summary")
    users = tmp_path / ".notes.tmp"
    users.write_text("the user's notes")
    store.remove_temps(tmp_path)
    assert not ours.exists()
    assert users.read_text() == "the user's notes"
