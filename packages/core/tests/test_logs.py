"""Structured events for every phase, JSON on request, credentials never logged, and never
on the job's stdout: eosink's events go through the standard ``logging`` tree."""

import json
import logging
import os
import pickle
import subprocess
import sys

import pyarrow as pa
import structlog
from sample_sinks import MemorySink

from eosink import configure_logging
from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.logs import LogSettings, PhaseLogger, get_logger, redact, reset_logging
from eosink.testing import LocalRunner


def test_redact_hides_credentials_at_any_depth():
    event = {"options": {"token": "AQAD-secret", "proxy": "yt"}, "list": [{"password": "p"}]}
    assert redact(event) == {
        "options": {"token": "***", "proxy": "yt"},
        "list": [{"password": "***"}],
    }


def test_every_phase_logs_sink_writer_batch_and_duration():
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    rows = [[pa.record_batch({"id": pa.array([1, 2], pa.int64())})]]
    with structlog.testing.capture_logs() as events:
        run_batch(MemorySink(name="logs"), ctx, rows[0][0].schema, LocalRunner(rows))
        run_batch(MemorySink(name="logs"), ctx, rows[0][0].schema, LocalRunner(rows))
    names = [e["event"] for e in events]
    for phase in ("is_committed", "init", "commit"):
        assert f"phase.{phase}" in names
    committed = next(e for e in events if e["event"] == "batch.committed")
    assert (committed["sink"], committed["writer"], committed["batch"], committed["rows"]) == (
        "memory",
        "w",
        0,
        2,
    )
    skipped = next(e for e in events if e["event"] == "batch.skipped")
    assert skipped["skipped"] is True and "duration_ms" in skipped


def test_json_output_without_secrets(capsys):
    configure_logging(json=True)
    try:
        get_logger("eosink").info("sink.configured", options={"token": "AQAD-secret"})
    finally:
        reset_logging()
    captured = capsys.readouterr()
    line = captured.err.strip().splitlines()[-1]
    event = json.loads(line)
    assert event["event"] == "sink.configured" and "AQAD" not in line
    assert captured.out == ""


def run_twice(name: str) -> None:
    """A batch committed, then its replay skipped."""
    ctx = BatchContext(sink="memory", writer_id="w", batch_id=0)
    rows = [[pa.record_batch({"id": pa.array([1, 2], pa.int64())})]]
    run_batch(MemorySink(name=name), ctx, rows[0][0].schema, LocalRunner(rows))
    run_batch(MemorySink(name=name), ctx, rows[0][0].schema, LocalRunner(rows))


UNCONFIGURED_JOB = """
import sys
sys.path[:0] = {path!r}
from eosink.logs import get_logger
from test_logs import run_twice
run_twice("unconfigured")
get_logger("eosink.files").warning("files.torn_log_file", entry=3)
print("job output")
"""


def test_left_unconfigured_nothing_reaches_stdout(tmp_path):
    """A library inside someone's job (a process of its own: no test framework's handlers):
    no event on stdout, warnings on stderr, Python's own last resort for a logging tree
    nobody configured; INFO events dropped."""
    # absolute: the job runs in another folder (test runners put relative entries on the path)
    job = UNCONFIGURED_JOB.format(path=[os.path.abspath(p) for p in sys.path if p])
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOSINK_LOG")}
    done = subprocess.run(
        [sys.executable, "-c", job], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "job output\n"
    assert "files.torn_log_file" in done.stderr
    assert "batch.committed" not in done.stderr and "phase." not in done.stderr


def test_events_go_through_the_standard_logging_tree(caplog, capsys):
    with caplog.at_level(logging.INFO, logger="eosink"):
        run_twice("routed")
    by_name = {(r.name, r.levelno) for r in caplog.records}
    assert ("eosink", logging.INFO) in by_name
    assert any("batch.committed" in r.getMessage() for r in caplog.records)
    assert any("batch.skipped" in r.getMessage() for r in caplog.records)
    assert capsys.readouterr().out == ""


def test_configured_level_filters_and_stays_off_stdout(capsys):
    configure_logging(json=True, level="WARNING")
    run_twice("filtered")
    get_logger("eosink").warning("sink.slow", seconds=3)
    captured = capsys.readouterr()
    assert captured.out == ""
    events = [json.loads(line)["event"] for line in captured.err.splitlines()]
    assert events == ["sink.slow"]


def test_the_phase_logger_carries_the_settings_into_another_process(monkeypatch):
    """What a Spark worker does when it unpickles a write task (tests/test_logs_spark.py runs
    it for real): the driver's level, not the worker's default."""
    configure_logging(json=True, level=logging.DEBUG)
    shipped = pickle.dumps(PhaseLogger())
    assert PhaseLogger().settings == LogSettings(level=logging.DEBUG, json=True, handled=True)
    reset_logging()
    monkeypatch.setattr("os.getpid", lambda: -1)  # the unpickling side is another process
    pickle.loads(shipped)
    assert logging.getLogger("eosink").level == logging.DEBUG
