"""Where the cargoship.engine collection lives, so ansible-runner finds it without ansible-galaxy."""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
COLLECTIONS_PATH = CHECKOUT / ".collections"


def collections_path() -> Path:
    """The directory holding ``ansible_collections/cargoship/engine`` for this installation."""
    if not (COLLECTIONS_PATH / "ansible_collections" / "cargoship" / "engine" / "galaxy.yml").exists():
        raise FileNotFoundError(
            f"cargoship.engine collection not found under {COLLECTIONS_PATH}; "
            "install cargoship from a checkout of its repository (pip install -e .)"
        )
    return COLLECTIONS_PATH
