"""The SIGKILL tests' query process gets the database URL (with its password) through its
environment, never on its command line, which every user of the machine can read (ps,
/proc/<pid>/cmdline)."""

from __future__ import annotations

from urllib.parse import urlparse

from killed_query_run import start, started  # noqa: F401


def test_the_password_stays_off_the_command_line(tmp_path, database, started):  # noqa: F811
    password = urlparse(database).password
    assert password
    proc = start(tmp_path, "foreach_batch", database, started)
    with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert not any(password.encode() in arg for arg in argv), argv
    with open(f"/proc/{proc.pid}/environ", "rb") as f:
        assert password.encode() in f.read()
