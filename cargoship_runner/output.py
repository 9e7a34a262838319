"""Where the command writes: the console (progress, report) and the error stream.

Both print text as it is: markup is off, so a message, host name or path that looks like rich markup
(``[/path]``, ``[red]``, ``[k3s, rke2]``) is shown verbatim and can never raise. Style comes only from
``styled``, whose pieces are text too.

Off a terminal (a pipe, a file, CI's log) a line is printed as long as it is: folded at rich's 80 columns it
would cut a path or a message in two for whoever greps the log. The report's table keeps its own width."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

console = Console(highlight=False, markup=False, emoji=False, soft_wrap=not sys.stdout.isatty())
errors = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line from plain pieces and (text, style) pairs; no piece is read as markup."""
    return Text.assemble(*((str(p[0]), p[1]) if isinstance(p, tuple) else str(p) for p in parts))
