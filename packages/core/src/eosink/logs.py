"""Structured logs: one event per phase of every batch, JSON when asked, no secrets.

``PhaseLogger`` is an ordinary cross-cutting plugin: it wraps every hook with a pluggy wrapper
and logs the phase, its duration and its outcome, so sinks never log their own timings.
``configure_logging`` sets up structlog for people who have not; it redacts any field whose
name looks like a credential (YT tokens travel in options).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Generator
from typing import Any

import structlog

from eosink.hookspecs import hookimpl

SECRET_MARKERS = ("token", "secret", "password", "credential", "authorization", "key_id")
REDACTED = "***"


def redact(value: Any) -> Any:
    """A copy of ``value`` with every credential-looking mapping entry replaced."""
    if isinstance(value, dict):
        return {
            k: REDACTED if _is_secret(k) else redact(v)  # credentials never reach a log line
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) for v in value)
    return value


def _is_secret(key: Any) -> bool:
    return isinstance(key, str) and any(m in key.lower() for m in SECRET_MARKERS)


def redact_secrets(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: drop credentials from every event."""
    return redact(event)


def configure_logging(json: bool | None = None, level: int = logging.INFO) -> None:
    """Configure structlog for eosink's events; JSON lines if ``json`` or ``EOSINK_LOG_JSON=1``."""
    if json is None:
        json = os.environ.get("EOSINK_LOG_JSON", "") not in ("", "0", "false")
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def _files(messages: list[Any]) -> int | None:
    """Files written, when the sink's messages say (a ``files`` sequence or count)."""
    total, seen = 0, False
    for message in messages or ():
        files = getattr(message, "files", None)
        if files is None:
            continue
        seen = True
        total += files if isinstance(files, int) else len(files)
    return total if seen else None


class PhaseLogger:
    """Logs every phase of every batch: sink, writer, batch, duration, outcome."""

    def __init__(self, logger: Any = None) -> None:
        self._log = logger

    @property
    def log(self) -> Any:
        return self._log or structlog.get_logger("eosink")

    def _wrap(self, phase: str, ctx: Any, **fields: Any) -> Generator[None, Any, Any]:
        started = time.monotonic()
        try:
            result = yield
        except BaseException as exc:
            self.log.warning(
                f"phase.{phase}",
                sink=ctx.sink,
                writer=ctx.writer_id,
                batch=ctx.batch_id,
                duration_ms=round((time.monotonic() - started) * 1000, 2),
                error=type(exc).__name__,
                **fields,
            )
            raise
        extra = {"committed": result is not None} if phase == "is_committed" else {}
        self.log.debug(
            f"phase.{phase}",
            sink=ctx.sink,
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            duration_ms=round((time.monotonic() - started) * 1000, 2),
            **fields,
            **extra,
        )
        return result

    @hookimpl(wrapper=True)
    def is_committed(self, ctx: Any) -> Generator[None, Any, Any]:
        return (yield from self._wrap("is_committed", ctx))

    @hookimpl(wrapper=True)
    def init(self, ctx: Any) -> Generator[None, Any, Any]:
        return (yield from self._wrap("init", ctx))

    @hookimpl(wrapper=True)
    def write(self, ctx: Any, partition_id: int, attempt: int) -> Generator[None, Any, Any]:
        return (yield from self._wrap("write", ctx, partition=partition_id, attempt=attempt))

    @hookimpl(wrapper=True)
    def write_dataframe(self, ctx: Any) -> Generator[None, Any, Any]:
        return (yield from self._wrap("write_dataframe", ctx))

    @hookimpl(wrapper=True)
    def commit(self, ctx: Any, messages: list[Any], proof: Any) -> Generator[None, Any, Any]:
        return (
            yield from self._wrap(
                "commit", ctx, rows=proof.rows, partitions=len(messages), files=_files(messages)
            )
        )

    @hookimpl(wrapper=True)
    def abort(self, ctx: Any, messages: list[Any]) -> Generator[None, Any, Any]:
        return (yield from self._wrap("abort", ctx, partitions=len(messages or ())))
