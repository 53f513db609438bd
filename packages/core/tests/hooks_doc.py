"""``docs/hooks.md``, generated from the hook specs' docstrings (their one source).

The contract's prose lives in :mod:`eosink.hookspecs`: the module docstring tells the story of
a batch, each hookspec's docstring where the hook runs, what it returns and guarantees and what
it must never do. This renders them as Markdown, in the specs' order; ``test_hookspecs.py``
fails when the committed page differs from what this renders. After editing a docstring::

    ./pants run packages/core/tests/hooks_doc.py > packages/core/docs/hooks.md
"""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path
from types import FunctionType

from eosink import hookspecs

DOCS = Path(__file__).resolve().parents[1] / "docs" / "hooks.md"

HEADER = """\
# eosink hooks: the sink contract

<!-- Generated from packages/core/src/eosink/hookspecs.py by packages/core/tests/hooks_doc.py:
     edit the docstrings there, then regenerate this page. -->
"""

#: ``:class:`~eosink.model.Proof``` -> ``Proof``; ``:func:`eosink.plugin.crash_point``` kept whole.
ROLE = re.compile(r":(?:class|func|mod|data|meth|attr|exc):`(~?)([\w.]+)`")
LITERAL = re.compile(r"``(.+?)``")


def specs() -> list[FunctionType]:
    """The hook specs, in the order the module declares them."""
    found = [
        fn
        for fn in vars(hookspecs).values()
        if inspect.isfunction(fn) and hasattr(fn, f"{hookspecs.PROJECT}_spec")
    ]
    return sorted(found, key=lambda fn: fn.__code__.co_firstlineno)


def inline(text: str) -> str:
    """reStructuredText's inline markup, as Markdown."""
    text = ROLE.sub(lambda m: f"`{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}`", text)
    return LITERAL.sub(r"`\1`", text)


def markdown(docstring: str) -> str:
    """A docstring as Markdown: paragraphs kept, a ``::`` literal block fenced."""
    out: list[str] = []
    lines = inspect.cleandoc(docstring).splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.endswith("::"):
            out.append(inline(line[:-2].rstrip() + ":"))
            block: list[str] = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                block.append(lines[i])
                i += 1
            out += ["", "```", textwrap.dedent("\n".join(block)).strip("\n"), "```", ""]
            continue
        out.append(inline(line))
        i += 1
    return "\n".join(out).strip("\n")


def render() -> str:
    """The whole page."""
    parts = [HEADER, markdown(hookspecs.__doc__ or "")]
    for fn in specs():
        arguments = ", ".join(inspect.signature(fn).parameters)
        parts.append(f"## {fn.__name__}({arguments})\n\n{markdown(fn.__doc__ or '')}")
    return "\n\n".join(part.strip("\n") for part in parts) + "\n"


if __name__ == "__main__":
    print(render(), end="")
