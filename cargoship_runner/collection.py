"""Where the cargoship.engine collection lives, and the collection path a run gets.

The collection is found, in this order:

1. inside this package (``cargoship_runner/_collection``), where a built wheel carries it;
2. in the checkout this package runs from (``pip install -e .``), through ``.collections``;
3. on Ansible's own collection path (``ANSIBLE_COLLECTIONS_PATH`` or ``collections_path`` of ansible.cfg),
   for a collection installed with ``ansible-galaxy``; its version must be this command's.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from cargoship_runner import __version__

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent
BUNDLED = PACKAGE / "_collection"
CHECKOUT_PATH = CHECKOUT / ".collections"
COLLECTION = Path("ansible_collections") / "cargoship" / "engine"


class CollectionNotFound(RuntimeError):
    """The collection is nowhere this command looks, or only in a version that is not its own."""


def galaxy_version(root: Path) -> str | None:
    """The version a collection's galaxy.yml (or MANIFEST.json, once built by ansible-galaxy) declares."""
    import json

    import yaml

    if (root / "MANIFEST.json").is_file():
        return json.loads((root / "MANIFEST.json").read_text())["collection_info"]["version"]
    if (root / "galaxy.yml").is_file():
        return str(yaml.safe_load((root / "galaxy.yml").read_text()).get("version"))
    return None


def user_collections_paths(config: Path | None = None) -> list[str]:
    """The collection path ansible-playbook started here would use: the environment, else ansible.cfg
    (relative entries resolved against the file's directory), else Ansible's default."""
    from ansible.config.manager import ConfigManager

    manager = ConfigManager(conf_file=str(config) if config else None)
    paths, origin = manager.get_config_value_and_origin("COLLECTIONS_PATHS")
    if origin == "default":
        # Ansible's default is a template over ANSIBLE_HOME, which only ansible.constants renders.
        home = manager.get_config_value("ANSIBLE_HOME")
        paths = [f"{home}/collections", "/usr/share/ansible/collections"]
    return [str(Path(p).expanduser()) for p in paths or []]


def collections_path(config: Path | None = None) -> Path:
    """The directory holding ``ansible_collections/cargoship/engine`` for this installation."""
    for candidate in (BUNDLED, CHECKOUT_PATH):
        if (candidate / COLLECTION / "galaxy.yml").is_file() or (candidate / COLLECTION / "MANIFEST.json").is_file():
            return candidate
    looked = [str(BUNDLED), str(CHECKOUT_PATH)]
    for entry in user_collections_paths(config):
        root = Path(entry) / COLLECTION
        version = galaxy_version(root)
        if version is None:
            looked.append(entry)
            continue
        if version != __version__:
            raise CollectionNotFound(
                f"the cargoship.engine collection in {entry} is version {version}, this cargoship command is "
                f"{__version__}: install the same version of both (pip install cargoship=={version}, or "
                f"ansible-galaxy collection install cargoship.engine:=={__version__})"
            )
        return Path(entry)
    raise CollectionNotFound(
        "the cargoship.engine collection was not found (looked in: " + ", ".join(looked) + "). Install cargoship "
        "from its wheel (pip install cargoship), which carries it, or install the collection on Ansible's "
        f"collection path: ansible-galaxy collection install cargoship.engine:=={__version__}"
    )


def run_collections_path(config: Path | None = None) -> str:
    """ANSIBLE_COLLECTIONS_PATH for a run: ours in front, then the user's, so that their hook modules and
    inventory plugins from other collections are found as ansible-playbook would find them."""
    ours = str(collections_path(config))
    return os.pathsep.join(dict.fromkeys([ours, *user_collections_paths(config)]))


def _importable() -> None:
    """The collection's Python code importable here, so the command and the playbooks share one implementation."""
    import sys

    path = str(collections_path())
    if path not in sys.path:
        sys.path.insert(0, path)


def _plugin_utils() -> SimpleNamespace:
    """The collection's controller-side code, by module name (phases, report, hooks, node_progress,
    run_options)."""
    _importable()
    from ansible_collections.cargoship.engine.plugins.plugin_utils import (
        _hooks,
        _node_progress,
        _phases,
        _report,
        _run_options,
    )

    return SimpleNamespace(
        phases=_phases, report=_report, hooks=_hooks, node_progress=_node_progress, run_options=_run_options
    )


def run_options():
    """The table of every inventory variable cargoship reads (plugin_utils/_run_options.py)."""
    return _plugin_utils().run_options


def concurrency_pattern():
    """The work concurrency's pattern, as the playbook's input validation has it."""
    _importable()
    from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import CONCURRENCY

    return CONCURRENCY


def lock_keeper():
    """The lock keeper's helpers (plugin_utils/_lock_keeper.py): whether a process is alive."""
    _importable()
    from ansible_collections.cargoship.engine.plugins.plugin_utils import _lock_keeper

    return _lock_keeper


def plan_module():
    """The reviewed plan's file format and checks (plugin_utils/_plan.py)."""
    _importable()
    from ansible_collections.cargoship.engine.plugins.plugin_utils import _plan

    return _plan


def report_module():
    """The report's data and plain rendering (plugin_utils/_report.py)."""
    return _plugin_utils().report


def node_progress():
    """A tracker of the nodes whose sync window is open (plugin_utils/_node_progress.py)."""
    return _plugin_utils().node_progress.NodeProgress()


def phases(operation: str | None = None) -> list[dict]:
    """The phase declarations."""
    return _plugin_utils().phases.load_phases(operation=operation)


def phase_lines(phase: dict) -> list[str]:
    """The report's lines for one phase, as the callback's table shows them."""
    return _plugin_utils().report.phase_lines(phase)


def phase_hook_points(phase: dict) -> list[str]:
    """Where hooks attach to a phase."""
    return _plugin_utils().hooks.hook_points(phase)
