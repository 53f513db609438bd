"""Structured events for every phase, JSON on request, credentials never logged."""

import json

import pyarrow as pa
import structlog
from sample_sinks import MemorySink

from eosink import BatchContext, configure_logging, run_batch
from eosink.logs import redact
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
        structlog.get_logger("eosink").info("sink.configured", options={"token": "AQAD-secret"})
    finally:
        structlog.reset_defaults()
    line = capsys.readouterr().err.strip().splitlines()[-1]
    event = json.loads(line)
    assert event["event"] == "sink.configured" and "AQAD" not in line
