"""Structured logs: one event per phase of every batch, JSON when asked, no secrets.

``PhaseLogger`` is an ordinary cross-cutting plugin: it wraps every hook with a pluggy wrapper
and logs the phase, its duration and its outcome, so sinks never log their own timings.

eosink is a library inside someone else's job, so its events never go to the job's stdout:
every eosink logger (:func:`get_logger`) is a structlog logger whose output is handed to the
standard ``logging`` logger of the same name (``eosink``, ``eosink.files``, ...). Users route,
filter and format them as any other library's logs; structlog's own configuration, when the job
has one, still processes the events first. Left alone, Python prints warnings and errors to
stderr and drops the rest. ``configure_logging`` is the short way for people who have not set
up logging: a stderr handler on ``eosink`` at a level, console or JSON lines, credentials
redacted (YT tokens travel in options).

Spark's Python workers (executors, and the planning and commit workers of the data sources)
never run the driver's logging set-up. So the driver's settings (:class:`LogSettings`) travel
with the work: inside the pickled :class:`PhaseLogger` of every write task, and as environment
variables (``EOSINK_LOG_LEVEL``, ``EOSINK_LOG_JSON``) for processes started after
``configure_logging`` (a local Spark) or given them by the user (``spark.executorEnv.*``).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Generator
from typing import Any

import attrs
import structlog

from eosink.hookspecs import hookimpl

SECRET_MARKERS = ("token", "secret", "password", "credential", "authorization", "key_id")
REDACTED = "***"

#: The root of eosink's loggers in the standard ``logging`` tree.
ROOT_LOGGER = "eosink"
#: Environment variables a worker reads its settings from when nothing else configured it.
LEVEL_ENV = "EOSINK_LOG_LEVEL"
JSON_ENV = "EOSINK_LOG_JSON"


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


def get_logger(name: str = ROOT_LOGGER) -> Any:
    """eosink's logger ``name``: structlog's processing, the standard logger ``name``'s output.

    The structlog configuration is read at every call (as for ``structlog.get_logger``), so a
    job's own ``structlog.configure`` and ``structlog.testing.capture_logs`` apply; only the
    final output is pinned to ``logging``, never structlog's default of printing to stdout.
    """
    return structlog.wrap_logger(logging.getLogger(name))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the event (as ``logging``'s own
    last-resort handler does), so a replaced stderr (a notebook, a test) gets the lines."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


@attrs.frozen
class LogSettings:
    """The logging a process set up for eosink, as shipped to the processes Spark starts.

    ``json`` is None unless :func:`configure_logging` ran (then the workers run it too, with
    the same arguments); otherwise the workers only take the level of the ``eosink`` logger,
    and a stderr handler when the driver had a handler for eosink's events. ``pid`` is the
    process the settings were taken in: applying them there again changes nothing.
    """

    level: int
    json: bool | None = None
    handled: bool = False
    pid: int = attrs.field(factory=os.getpid)


#: What configure_logging set up in this process (None: nothing).
_configured: LogSettings | None = None


def configure_logging(json: bool | None = None, level: int | str | None = None) -> None:
    """Print eosink's events to stderr at ``level``, as JSON lines if ``json``.

    Defaults: ``EOSINK_LOG_JSON`` and ``EOSINK_LOG_LEVEL`` (else console lines at INFO). Also
    configures structlog's processors (timestamp, level, redaction) and exports both settings
    to the environment of processes started later (e.g. a local Spark's Python workers).
    Skip it to route eosink's events through your own ``logging`` set-up instead.
    """
    global _configured
    if json is None:
        json = os.environ.get(JSON_ENV, "") not in ("", "0", "false")
    if level is None:
        level = os.environ.get(LEVEL_ENV) or logging.INFO
    numeric = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}: use DEBUG, INFO, WARNING or ERROR")
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
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    logger = logging.getLogger(ROOT_LOGGER)
    logger.setLevel(numeric)
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    # Printed here only, not again by handlers of the root logger.
    logger.propagate = False
    os.environ[LEVEL_ENV] = logging.getLevelName(numeric)
    os.environ[JSON_ENV] = "1" if json else "0"
    _configured = LogSettings(level=numeric, json=json, handled=True)


def reset_logging() -> None:
    """Undo :func:`configure_logging` (and structlog's configuration) in this process."""
    global _configured
    logger = logging.getLogger(ROOT_LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
    for name in (LEVEL_ENV, JSON_ENV):
        os.environ.pop(name, None)
    structlog.reset_defaults()
    _configured = None


def current_settings() -> LogSettings:
    """This process's logging for eosink, to ship to Spark's workers."""
    if _configured is not None:
        return attrs.evolve(_configured, pid=os.getpid())
    logger = logging.getLogger(ROOT_LOGGER)
    return LogSettings(level=logger.getEffectiveLevel(), handled=logger.hasHandlers())


def apply_settings(settings: LogSettings) -> None:
    """Take the driver's ``settings`` in a Spark worker (a no-op in the process they came from).

    Runs in every process that unpickles a write task; cheap when they are already in force.
    """
    if settings.pid == os.getpid():
        return
    if settings.json is not None:
        if _configured is None or (_configured.level, _configured.json) != (
            settings.level,
            settings.json,
        ):
            configure_logging(json=settings.json, level=settings.level)
        return
    logger = logging.getLogger(ROOT_LOGGER)
    logger.setLevel(settings.level)
    if settings.handled and not logger.hasHandlers():
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)


def _settings_from_environment() -> None:
    """A worker started with ``EOSINK_LOG_LEVEL`` (by configure_logging's export, or by the
    user's ``spark.executorEnv``) and no logging of its own takes it when eosink is imported."""
    if os.environ.get(LEVEL_ENV) and _configured is None:
        logger = logging.getLogger(ROOT_LOGGER)
        if logger.level == logging.NOTSET and not logger.handlers:
            configure_logging()


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
    """Logs every phase of every batch: sink, writer, batch, duration, outcome.

    It is also the executor plugin of every write task (see ``eosink.protocol``): pickled with
    the task, it carries the driver's :class:`LogSettings` into Spark's workers and applies them
    there before the first event, so executor-side events honour the level the job set.
    """

    def __init__(self, logger: Any = None, settings: LogSettings | None = None) -> None:
        self._log = logger
        self.settings = settings or current_settings()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        apply_settings(self.settings)

    @property
    def log(self) -> Any:
        return self._log or get_logger(ROOT_LOGGER)

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


_settings_from_environment()
