"""The ``cargoship`` command line."""

from __future__ import annotations

import click

from cargoship_runner import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cargoship", message="%(prog)s %(version)s")
def main() -> None:
    """Change the engine configuration of a k3s or RKE2 fleet without an outage.

    cargoship shows exactly what it would do before it touches anything (--dry-run),
    then does it one safe phase at a time.
    """
