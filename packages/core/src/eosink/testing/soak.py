"""Soak the kit's generated histories: new seeds, for as long as asked.

CI runs each sink's :class:`~eosink.testing.simulation.SinkSimulation` with a fixed number of
examples, derandomized, so a red run is the same run again. A soak runs the same tests with a
new seed per round (``--hypothesis-seed``) and many more examples, until the time is up, and
prints every failing seed with the history hypothesis shrank it to::

    python -m eosink.testing.soak --minutes 60 --examples 200 packages/sink-files/tests

(any pytest arguments after the options; only ``test_generated_histories`` tests run). Each
round runs each test path given in a pytest process of its own, with the round's seed: the
sinks' simulations are all named ``test_simulation.py`` in folders without ``__init__.py``,
which one pytest process cannot collect side by side ("import file mismatch"), so one call
soaks every sink. A failing path is printed in full and the soak goes on with the next one.
``--stats FILE`` collects one JSON line per history (steps, batches, crashes, store faults
armed and fired, filtered reads) and the soak prints their totals at the end; ``--rounds N``
stops after N rounds.

In this repository the tests need every package on the import path: ``build-support/soak``
sets it up and calls this module.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eosink.testing.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to soak")
    parser.add_argument("--examples", type=int, default=200, help="histories per round")
    parser.add_argument("--seed", type=int, default=None, help="the first round's seed")
    parser.add_argument("--rounds", type=int, default=None, help="stop after this many rounds")
    parser.add_argument("--stats", type=Path, default=None, help="JSON lines, one per history")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="what pytest runs")
    args = parser.parse_args(argv)
    stats = args.stats or Path(tempfile.mkstemp(prefix="eosink-soak-", suffix=".jsonl")[1])
    deadline = time.monotonic() + args.minutes * 60
    rng = random.Random(args.seed)
    seed = args.seed if args.seed is not None else rng.randrange(2**32)
    paths, options = _split(args.pytest_args)
    rounds, failed = 0, []
    while time.monotonic() < deadline and rounds != args.rounds:
        rounds += 1
        for path in paths:
            started = time.monotonic()
            done = _round(seed, args.examples, stats, [*options, *path])
            took = time.monotonic() - started
            status = "passed" if done.returncode == 0 else "FAILED"
            name = " ".join(path) or "(pytest's default paths)"
            print(f"round {rounds}: seed {seed}: {name}: {status} in {took:.0f} s", flush=True)
            if done.returncode != 0:
                failed.append(f"{seed} ({name})")
                print(f"--- seed {seed}: {name} ---\n{done.stdout}\n--- end ---", flush=True)
        seed = rng.randrange(2**32)
    _summary(rounds, failed, stats)
    return 1 if failed else 0


def _split(pytest_args: list[str]) -> tuple[list[list[str]], list[str]]:
    """The test paths given (each run in its own process: ``[[]]`` when none is), and the
    other pytest arguments, which every process gets."""
    paths: list[list[str]] = []
    options: list[str] = []
    for arg in pytest_args:
        if arg == "--":
            continue
        if not arg.startswith("-") and Path(arg.split("::", 1)[0]).exists():
            paths.append([arg])
        else:
            options.append(arg)
    return paths or [[]], options


def _round(
    seed: int, examples: int, stats: Path, pytest_args: list[str]
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "EOSINK_SIMULATION_SOAK": "1",
        "EOSINK_SIMULATION_EXAMPLES": str(examples),
        "EOSINK_SIMULATION_STATS": str(stats),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:logging",
        f"--hypothesis-seed={seed}",
        "-k",
        "generated_histories",
        *pytest_args,
    ]
    return subprocess.run(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
    )


def _summary(rounds: int, failed: list[str], stats: Path) -> None:
    totals: Counter[str] = Counter()
    by_kit: Counter[str] = Counter()
    if stats.exists():
        for line in stats.read_text().splitlines():
            history = json.loads(line)
            by_kit[history.pop("kit")] += 1
            totals.update({k: v for k, v in history.items() if isinstance(v, int)})
    print(f"{rounds} round(s), {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))
    print(f"histories: {sum(by_kit.values())} ({', '.join(f'{k} {n}' for k, n in by_kit.items())})")
    print("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))


if __name__ == "__main__":
    sys.exit(main())
