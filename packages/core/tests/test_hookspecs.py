"""The hook specs and their documentation agree (datasette's docs test, for eosink).

The specs' docstrings are the one source of the contract's prose; ``docs/hooks.md`` is
generated from them (``hooks_doc.py``) and must be regenerated when they change.
"""

import inspect
import re
from pathlib import Path

import pytest

import hooks_doc
from eosink import hookspecs

PACKAGE = Path(__file__).resolve().parents[1]
DOCS = PACKAGE / "docs" / "hooks.md"
README = PACKAGE / "README.md"
HEADING = re.compile(r"^## (\w+)\(([^)]*)\)$", re.MULTILINE)
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
ORDINALS = ["zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"]


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
        "upsert_key",
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


def test_the_hooks_page_is_generated_from_the_hookspecs():
    assert DOCS.read_text() == hooks_doc.render(), (
        "docs/hooks.md is out of step with eosink/hookspecs.py: regenerate it with "
        "`./pants run packages/core/tests/hooks_doc.py > packages/core/docs/hooks.md`"
    )


def test_every_hook_is_in_exactly_one_group():
    groups = (
        hookspecs.BATCH_HOOKS
        + hookspecs.DATAFRAME_HOOKS
        + hookspecs.KEY_HOOKS
        + hookspecs.OPERATOR_HOOKS
    )
    assert sorted(groups) == sorted(specs())


def test_the_summary_line_counts_the_hooks():
    summary = " ".join((hookspecs.__doc__ or "").split("\n\n")[0].split())
    counts = {
        "hooks": len(specs()),
        "for every batch": len(hookspecs.BATCH_HOOKS),
        "operator hooks": len(hookspecs.OPERATOR_HOOKS),
    }
    for what, count in counts.items():
        said = re.search(rf"\b(\w+)(?: \w+)? {what}\b", summary)
        assert said is not None, f"the summary does not count the {what}: {summary!r}"
        assert said[1] == NUMBERS[count], f"the summary says {said[0]!r}; there are {count}"
    optional = ORDINALS[len(hookspecs.BATCH_HOOKS) + len(hookspecs.DATAFRAME_HOOKS)]
    assert len(hookspecs.DATAFRAME_HOOKS) == 1 and f"optional {optional}" in summary, summary


def test_the_readme_table_names_every_hook():
    first_cells = [
        line.split("|")[1] for line in README.read_text().splitlines() if line.startswith("| `")
    ]
    named = {m for cell in first_cells for m in re.findall(r"`(\w+)\(", cell)}
    assert named == set(specs())
