"""Where the command writes: the console (progress, report) and the error stream."""

from __future__ import annotations

from rich.console import Console

console = Console(highlight=False)
errors = Console(stderr=True, highlight=False, soft_wrap=True)
