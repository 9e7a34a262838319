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


def _plugin_utils():
    """The collection's controller-side code, so the command and the playbooks share one implementation."""
    import sys

    path = str(collections_path())
    if path not in sys.path:
        sys.path.insert(0, path)
    from ansible_collections.cargoship.engine.plugins.plugin_utils import _hooks, _phases, _report

    return _phases, _report, _hooks


def phases(operation: str | None = None) -> list[dict]:
    """The phase declarations."""
    return _plugin_utils()[0].load_phases(operation=operation)


def phase_lines(phase: dict) -> list[str]:
    """The report's lines for one phase, as the callback's table shows them."""
    return _plugin_utils()[1].phase_lines(phase)


def phase_hook_points(phase: dict) -> list[str]:
    """Where hooks attach to a phase."""
    return _plugin_utils()[2].hook_points(phase["name"])
