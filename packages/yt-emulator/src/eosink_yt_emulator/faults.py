"""Fault injection and the request log.

Fault kinds, and what the real client sees:

* ``"error"``: an HTTP 400 with a YT error (``code``, ``message``), like any command error.
* ``"503"``: HTTP 503 "proxy unavailable"; the client retries (``YtProxyUnavailable`` is
  retriable), volatile commands with ``retry=%true`` and the same mutation id.
* ``"lost_reply"``: the connection is closed without a response; the client sees a
  ``ConnectionError`` and retries the same way.  With ``when="after"`` the command
  *was* applied, so the retry must be answered by the response keeper; with
  ``when="before"`` it never reached the state.
* ``delay(command, seconds)``: the request sleeps before being executed (outside the
  state lock).
* ``expire_transaction(tx_id)``: the transaction is aborted now, exactly as its
  timeout would abort it (children included).
* ``on_next(command, callback)``: the next request of ``command`` first calls
  ``callback()`` and then proceeds normally.  The callback runs in the request's thread
  after the request was received and parsed, before the command is applied (and before
  the response keeper sees it), holding none of the emulator's locks, so it may itself
  send requests to the same emulator, e.g. commit a competing tablet transaction so
  that the intercepted ``commit_transaction`` meets a real write-write conflict.  If
  the callback raises, the request is answered with that error and not applied.

``when="before"`` faults fire before the command touches the state; ``when="after"``
faults fire after it was applied (and its response stored for mutations).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

#: The commands a rule is about: a name, ``"*"`` (any), or a list or tuple of names.
Commands = str | Sequence[str]
#: Which calls a rule takes: parameters they must have, or a predicate of the parameters.
Match = dict[str, Any] | Callable[[dict[str, Any]], bool] | None

KINDS = ("error", "503", "lost_reply")
# Kinds that do not answer the request themselves: the request goes on after them (a delay
# and a callback may both fire for one request, before at most one answering fault).
PASS_THROUGH_KINDS = ("delay", "callback")


class FaultRule:
    def __init__(
        self,
        command: Commands,
        when: str = "before",
        kind: str = "error",
        times: int | None = 1,
        code: int = 1,
        message: str | None = None,
        match: Match = None,
        seconds: float = 0.0,
        callback: Callable[[], Any] | None = None,
        skip: int = 0,
    ) -> None:
        if when not in ("before", "after"):
            raise ValueError("when must be 'before' or 'after'")
        if kind not in KINDS + PASS_THROUGH_KINDS:
            raise ValueError(f"kind must be one of {KINDS + PASS_THROUGH_KINDS}")
        if (kind == "callback") != (callback is not None):
            raise ValueError("a callback goes with kind 'callback' only, and it needs one")
        if callback is not None and not callable(callback):
            raise ValueError("callback must be callable")
        self.command = command
        self.when = when
        self.kind = kind
        self.times = times  # None = forever
        self.code = int(code)
        self.message = message or f"Injected fault for command {command!r}"
        self.match = match
        self.seconds = float(seconds)
        self.callback = callback
        self.skip = int(skip)  # matching calls let through before the rule fires
        self.fired = 0

    def matches(self, command: str, params: dict[str, Any]) -> bool:
        """Whether the rule applies to a call of ``command`` with ``params`` at ``when``."""
        names = (self.command,) if isinstance(self.command, str) else tuple(self.command)
        if command not in names and "*" not in names:
            return False
        if self.match is None:
            return True
        if callable(self.match):
            return bool(self.match(params))
        for k, v in self.match.items():
            pv = params.get(k)
            if hasattr(pv, "value"):
                pv = pv.value
            if str(pv) != str(v):
                return False
        return True

    def describe(self) -> dict[str, Any]:
        return {
            "command": self.command if isinstance(self.command, str) else list(self.command),
            "when": self.when,
            "kind": self.kind,
            "times": self.times,
            "code": self.code,
            "message": self.message,
            "seconds": self.seconds,
            "fired": self.fired,
            "skip": self.skip,
            "match": None if callable(self.match) else self.match,
            "callback": None if self.callback is None else repr(self.callback),
        }


class Faults:
    """Test-side API for injecting faults (in-process: ``emu.faults``)."""

    def __init__(self, emulator: Any = None) -> None:
        self._emulator = emulator
        self._rules = []
        self._lock = threading.Lock()

    # -- public API ----------------------------------------------------------

    def fail_next(
        self,
        command: Commands,
        when: str = "before",
        kind: str = "error",
        times: int | None = 1,
        code: int = 1,
        message: str | None = None,
        match: Match = None,
        skip: int = 0,
    ) -> FaultRule:
        """Fail the next ``times`` calls of ``command`` (``"*"`` = any command; a list or tuple
        of names: any of them), after letting ``skip`` matching calls through.

        ``kind``: ``"error"`` (YT error ``code``/``message``), ``"503"`` or ``"lost_reply"``.
        ``when``: ``"before"`` applying the command or ``"after"`` applying it.
        ``match``: a dict of parameter values (e.g. ``{"transaction_id": tx}``) or a callable
        ``params -> bool`` restricting which calls are affected.
        """
        rule = FaultRule(command, when, kind, times, code, message, match, skip=skip)
        with self._lock:
            self._rules.append(rule)
        return rule

    def respond_503(
        self,
        command: Commands,
        times: int | None = 1,
        when: str = "before",
        match: Match = None,
    ) -> FaultRule:
        """Answer the next ``times`` calls of ``command`` with HTTP 503."""
        return self.fail_next(command, when=when, kind="503", times=times, match=match)

    def lose_reply(
        self, command: Commands, times: int = 1, when: str = "after", match: Match = None
    ) -> FaultRule:
        """Apply the next ``times`` calls of ``command``, then drop the connection unanswered."""
        return self.fail_next(command, when=when, kind="lost_reply", times=times, match=match)

    def delay(
        self,
        command: Commands,
        seconds: float,
        times: int | None = None,
        match: Match = None,
    ) -> FaultRule:
        """Delay calls of ``command`` by ``seconds`` (all calls unless ``times`` is given)."""
        rule = FaultRule(command, "before", "delay", times, seconds=seconds, match=match)
        with self._lock:
            self._rules.append(rule)
        return rule

    def on_next(
        self,
        command: Commands,
        callback: Callable[[], object],
        match: Match = None,
        times: int | None = 1,
    ) -> FaultRule:
        """Call ``callback()`` when the next ``times`` calls of ``command`` arrive, before each
        is applied; then the call proceeds normally (``times=None``: every call).

        The callback holds no emulator lock, so it may use a client of this emulator (a
        competing write, a read of the state the command is about to change).  With
        ``times=None`` give a ``match`` that excludes the callback's own requests, or it
        calls itself.  A callback that raises fails the request (a YT error naming the
        exception; the command is not applied).  In-process only: a callable does not
        cross the control endpoint.
        """
        rule = FaultRule(command, "before", "callback", times, match=match, callback=callback)
        with self._lock:
            self._rules.append(rule)
        return rule

    def expire_transaction(self, tx_id: str | None) -> None:
        """Abort ``tx_id`` as if its timeout had expired."""
        state = self._emulator.state
        with state.lock:
            state.txm.expire(tx_id)

    def clear(self) -> None:
        with self._lock:
            self._rules = []

    def pending(self) -> list[Any]:
        """The rules not yet applied."""
        with self._lock:
            return [r.describe() for r in self._rules if r.times is None or r.times > 0]

    # -- used by the HTTP layer -------------------------------------------------

    def take(self, command: str, when: str, params: dict[str, Any]) -> list[FaultRule]:
        """Return the rules that fire now for this call (consuming one use of each)."""
        fired = []
        with self._lock:
            for rule in self._rules:
                if rule.when != when or (rule.times is not None and rule.times <= 0):
                    continue
                if not rule.matches(command, params):
                    continue
                if rule.skip > 0:
                    rule.skip -= 1
                    continue
                if rule.times is not None:
                    rule.times -= 1
                rule.fired += 1
                fired.append(rule)
                if rule.kind not in PASS_THROUGH_KINDS:
                    break
            self._rules = [r for r in self._rules if r.times is None or r.times > 0]
        return fired


class RequestLog(list):
    """Every request the emulator received, oldest first (dicts)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def add(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.append(entry)

    def commands(self) -> list[Any]:
        """The logged calls' command names, in order (for tests that check what a client sent)."""
        return [e["command"] for e in list(self)]

    def of(self, command: str) -> list[Any]:
        return [e for e in list(self) if e["command"] == command]

    def clear(self) -> None:
        with self._lock:
            del self[:]


def now() -> float:
    return time.time()
