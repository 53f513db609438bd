"""The ``eosink`` command: see and repair what a sink holds, without writing code.

::

    eosink sinks                                       installed sinks, packages, versions
    eosink status files /data/orders                   writers, last batches, the manifest
    eosink verify delta /lake/orders                   exit 0 if the proofs' data is there
    eosink cleanup files /data/orders --older-than 24h [--delete]

The commands after ``sinks`` build the sink from TARGET (its ``path`` option) plus the options
given with the same names as the sink's own (``--proxy``, ``--token``, ``-o key=value``), and
call the sink's operator hooks (``target_status``, ``verify_target``, ``cleanup_target`` in
:mod:`eosink.hookspecs`). ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import attrs

from eosink.errors import EosinkError
from eosink.logs import configure_logging
from eosink.registry import installed_sinks, plugin_manager, sink_from_options
from eosink.reports import CleanupReport, TargetStatus, Verification

EXAMPLES = {
    "eosink": """examples:
  eosink sinks
  eosink status files /data/orders
  eosink verify delta /lake/orders --json
  eosink cleanup files /data/orders --older-than 24h --delete
  eosink status yt-static //home/me/orders --proxy my-cluster""",
    "sinks": """example:
  eosink sinks --json""",
    "status": """examples:
  eosink status files /data/orders
  eosink status delta s3://lake/orders --json
  eosink status yt-dynamic //home/me/orders --proxy my-cluster   # token: YT_TOKEN""",
    "verify": """examples:
  eosink verify files /data/orders && echo intact
  eosink verify yt-static //home/me/orders --proxy my-cluster --json
exit code: 0 when everything the proofs list is there, 1 when something is missing""",
    "cleanup": """examples:
  eosink cleanup files /data/orders                            # dry run: what would go
  eosink cleanup delta /lake/orders --older-than 48h --delete  # remove it
Only leftovers of failed attempts are removed, never anything a proof references, and never
anything younger than --older-than (a live writer may still publish it: set it above your
longest batch).""",
}

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``24h``, ``7d`` as seconds."""
    match = DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: give a duration such as 90s, 15m, 24h or 7d")
    return float(match.group(1)) * UNITS[match.group(2)]


def key_value(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r}: give an option as key=value")
    key, value = text.split("=", 1)
    return key.strip(), value


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="eosink",
        description="See and repair what eosink sinks hold: proofs, data, leftovers.",
        epilog=EXAMPLES["eosink"],
        formatter_class=_formatter,
    )
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")

    commands.add_parser(
        "sinks",
        parents=[common],
        help="the installed sinks, their packages and versions",
        description="List the sinks installed in this Python (entry point group eosink.sinks).",
        epilog=EXAMPLES["sinks"],
        formatter_class=_formatter,
    )
    target = argparse.ArgumentParser(add_help=False, parents=[common])
    target.add_argument("sink", metavar="SINK", help="the sink's name, e.g. files, delta")
    target.add_argument(
        "target",
        metavar="TARGET",
        help="what the sink writes to: its path option (a folder, a table)",
    )
    options = target.add_argument_group("connection options (the sinks' own option names)")
    options.add_argument("--proxy", help="YT sinks: the YT HTTP proxy")
    options.add_argument(
        "--token", help="YT sinks: the token (better: YT_TOKEN in the environment); never printed"
    )
    options.add_argument(
        "--proxy-discovery",
        choices=("true", "false"),
        help="YT sinks: discover proxies (false for single-proxy setups)",
    )
    options.add_argument("--client-config", help="YT sinks: extra YT client config, as JSON")
    options.add_argument(
        "-o",
        "--option",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="any other option of the sink, as in Spark's .option(KEY, VALUE); repeatable",
    )
    commands.add_parser(
        "status",
        parents=[target],
        help="writers, last committed batch per writer, the sink's state",
        description="Show the proofs a target holds (one per writer id) and the sink's state.",
        epilog=EXAMPLES["status"],
        formatter_class=_formatter,
    )
    commands.add_parser(
        "verify",
        parents=[target],
        help="check that what the proofs list is there (exit 0/1)",
        description="Check that every object the proofs reference is in the target.",
        epilog=EXAMPLES["verify"],
        formatter_class=_formatter,
    )
    cleanup = commands.add_parser(
        "cleanup",
        parents=[target],
        help="leftovers of failed attempts (dry run unless --delete)",
        description="Find, and with --delete remove, what failed attempts left behind.",
        epilog=EXAMPLES["cleanup"],
        formatter_class=_formatter,
    )
    cleanup.add_argument(
        "--older-than",
        type=duration,
        default=duration("24h"),
        metavar="DURATION",
        help="only leftovers older than this (default 24h; 90s, 15m, 24h, 7d)",
    )
    cleanup.add_argument("--delete", action="store_true", help="remove them (default: dry run)")
    return top


# -- the commands ------------------------------------------------------------------------------
def _dist_of(entry_point: Any) -> tuple[str | None, str | None]:
    dist = getattr(entry_point, "dist", None)
    name = getattr(dist, "name", None) if dist else None
    if not name:
        return None, None
    try:
        return name, version(name)
    except PackageNotFoundError:
        return name, None


def list_sinks() -> list[dict[str, Any]]:
    found = []
    for name, ep in sorted(installed_sinks().items()):
        dist, ver = _dist_of(ep)
        found.append({"sink": name, "package": dist, "version": ver, "class": ep.value})
    return found


def _sink_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {"path": args.target}
    for name in ("proxy", "token", "proxy_discovery", "client_config"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    options.update(dict(args.option))
    return options


def _call(args: argparse.Namespace, hook: str, **kwargs: Any) -> Any:
    sink = sink_from_options(args.sink, _sink_options(args))
    result = getattr(plugin_manager(sink).hook, hook)(**kwargs)
    if result is None:
        raise EosinkError(
            f"sink {args.sink!r} does not support `eosink {args.command}` (its package does "
            f"not implement the {hook} hook)"
        )
    return result


def _jsonable(value: Any) -> Any:
    if attrs.has(type(value)):
        data = attrs.asdict(value, recurse=True)
        if isinstance(value, Verification):
            data["ok"] = value.ok
        return data
    return value


# -- text output -------------------------------------------------------------------------------
def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(h) for h in header]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _when(timestamp: float | None) -> str:
    if not timestamp:
        return ""
    import datetime

    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%SZ"
    )


def _size(nbytes: int | None) -> str:
    if nbytes is None:
        return ""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(nbytes)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def print_status(status: TargetStatus) -> None:
    print(f"target: {status.target}")
    rows = [
        (p.writer_id, p.batch_id, _when(p.committed_at), p.rows, p.fingerprint, p.query_id)
        for p in status.writers
    ]
    if rows:
        print(table(rows, ("writer", "last batch", "committed", "rows", "fingerprint", "query")))
    else:
        print("no writer has committed a batch here")
    for key, value in status.details.items():
        text = json.dumps(value, default=str) if isinstance(value, (dict, list)) else value
        print(f"{key.replace('_', ' ')}: {text}")


def print_verification(result: Verification) -> None:
    verdict = "ok" if result.ok else f"{len(result.problems)} problem(s)"
    print(f"target: {result.target}\nchecked: {result.checked}\nresult: {verdict}")
    for problem in result.problems:
        print(f"  - {problem}")


def print_cleanup(report: CleanupReport) -> None:
    verb = "removed" if report.deleted else "would remove"
    print(f"target: {report.target}")
    rows = [(x.kind, x.path, _size(x.size), _age(x.age_s)) for x in report.removable]
    if rows:
        print(table(rows, ("leftover", "path", "size", "age")))
    sizes = [x.size for x in report.removable if x.size is not None]
    total = f", {_size(sum(sizes))}" if sizes else ""
    print(f"{verb} {len(report.removable)} leftover(s){total}")
    if report.kept:
        print(
            f"kept {len(report.kept)} (younger, so a live writer may still publish them, or "
            "not the sink's to remove):"
        )
        for x in report.kept:
            print(f"  {x.kind}  {x.path}  {_age(x.age_s)}")
    if not report.deleted and report.removable:
        print("dry run: add --delete to remove them")


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging(level=logging.WARNING)  # on stderr: stdout is for the report
    try:
        if args.command == "sinks":
            result: Any = list_sinks()
        elif args.command == "status":
            result = _call(args, "target_status")
        elif args.command == "verify":
            result = _call(args, "verify_target")
        else:
            result = _call(args, "cleanup_target", older_than_s=args.older_than, delete=args.delete)
    except EosinkError as exc:
        print(f"eosink {args.command}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(_jsonable(result), indent=2, default=str))
    elif args.command == "sinks":
        rows = [(s["sink"], s["package"], s["version"], s["class"]) for s in result]
        print(
            table(rows, ("sink", "package", "version", "class")) if rows else "no sinks installed"
        )
    elif args.command == "status":
        print_status(result)
    elif args.command == "verify":
        print_verification(result)
    else:
        print_cleanup(result)
    if isinstance(result, Verification) and not result.ok:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
