"""The hook specs and their documentation agree (datasette's docs test, for eosink)."""

import inspect
import re
from pathlib import Path

import pytest

from eosink import hookspecs

DOCS = Path(__file__).resolve().parents[1] / "docs" / "hooks.md"
HEADING = re.compile(r"^## (\w+)\(([^)]*)\)$", re.MULTILINE)


def specs() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(fn)
        for name, fn in vars(hookspecs).items()
        if inspect.isfunction(fn) and hasattr(fn, "eosink_spec")
    }


def documented() -> dict[str, list[str]]:
    return {
        name: [a.strip() for a in args.split(",") if a.strip()]
        for name, args in HEADING.findall(DOCS.read_text())
    }


def test_the_hooks_exist():
    assert set(specs()) == {
        "is_committed",
        "init",
        "write",
        "write_dataframe",
        "commit",
        "abort",
        # operator hooks, for the eosink command
        "target_status",
        "verify_target",
        "cleanup_target",
    }


def test_every_hook_is_documented_and_every_documented_hook_exists():
    assert set(documented()) == set(specs())


@pytest.mark.parametrize("name", sorted(specs()))
def test_documented_arguments_match(name):
    assert documented()[name] == list(specs()[name].parameters)


@pytest.mark.parametrize("name", sorted(specs()))
def test_docstring_says_where_it_runs_and_what_it_must_never_do(name):
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert any(
        where in doc
        for where in ("Runs on the driver", "Runs on an executor", "Runs in the ``eosink`` command")
    ), name
    assert "Must never" in doc or "must never" in doc.lower(), name
    assert "Returns" in doc or "Guarantees" in doc, name
