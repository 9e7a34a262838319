"""Where the command finds its collection, and the collection path a run gets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cargoship_runner import __version__, collection

REPO = collection.CHECKOUT


def install(root, version):
    """A cargoship.engine collection as ansible-galaxy installs it (MANIFEST.json) under ``root``."""
    target = root / "ansible_collections" / "cargoship" / "engine"
    target.mkdir(parents=True)
    (target / "MANIFEST.json").write_text(json.dumps({"collection_info": {"version": version}}))
    return root


@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    """Neither a bundled collection nor a checkout: only Ansible's collection path is left."""
    monkeypatch.setattr(collection, "BUNDLED", tmp_path / "bundled")
    monkeypatch.setattr(collection, "CHECKOUT_PATH", tmp_path / "checkout")
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_the_checkout_and_the_wheel_carry_the_same_version():
    assert collection.galaxy_version(REPO) == __version__


def test_a_bundled_collection_comes_first(tmp_path, monkeypatch):
    bundled = tmp_path / "bundled"
    target = bundled / "ansible_collections" / "cargoship" / "engine"
    target.mkdir(parents=True)
    (target / "galaxy.yml").write_text(f"version: {__version__}\n")
    monkeypatch.setattr(collection, "BUNDLED", bundled)
    assert collection.collections_path() == bundled


def test_otherwise_the_collection_on_ansibles_path_is_used_if_its_version_is_ours(nowhere, monkeypatch):
    installed = install(nowhere / "galaxy", __version__)
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", f"{nowhere / 'empty'}{os.pathsep}{installed}")
    assert collection.collections_path() == installed


def test_another_version_on_ansibles_path_is_refused_naming_both(nowhere, monkeypatch):
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(install(nowhere / "galaxy", "0.0.9")))
    with pytest.raises(collection.CollectionNotFound, match=f"version 0.0.9, this cargoship command is {__version__}"):
        collection.collections_path()


def test_no_collection_anywhere_says_where_it_looked_and_how_to_install_it(nowhere, monkeypatch):
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(nowhere / "empty"))
    with pytest.raises(collection.CollectionNotFound) as error:
        collection.collections_path()
    assert str(nowhere / "empty") in str(error.value)
    assert "pip install cargoship" in str(error.value)


def test_the_users_collection_path_is_kept_behind_ours(tmp_path, monkeypatch):
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", f"/opt/theirs{os.pathsep}/srv/more")
    ours = str(collection.collections_path())
    assert collection.run_collections_path().split(os.pathsep) == [ours, "/opt/theirs", "/srv/more"]


def test_a_relative_collection_path_of_ansible_cfg_is_read_from_the_files_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH", raising=False)
    config = tmp_path / "project" / "ansible.cfg"
    config.parent.mkdir()
    config.write_text("[defaults]\ncollections_path = ./collections:/shared/collections\n")
    paths = collection.run_collections_path(config).split(os.pathsep)
    assert paths[1:] == [str(tmp_path / "project" / "collections"), "/shared/collections"]


def test_without_any_setting_ansibles_default_path_is_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\n")
    assert collection.run_collections_path(config).split(os.pathsep)[1:] == [
        str(tmp_path / ".ansible" / "collections"),
        "/usr/share/ansible/collections",
    ]


def documentation(path: Path) -> str:
    """A module's DOCUMENTATION, read from its source without running it."""
    import ast

    tree = ast.parse(path.read_text())
    found = (n.value.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "DOCUMENTATION")
    return next(found)


def test_the_kubernetes_action_group_holds_exactly_the_modules_with_the_api_connection_options():
    import yaml

    from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import ARGUMENT_SPEC

    root = Path(__file__).resolve().parents[2]
    group = yaml.safe_load((root / "meta" / "runtime.yml").read_text())["action_groups"]["kubernetes"]
    with_api = sorted(
        path.stem
        for path in (root / "plugins" / "modules").glob("*.py")
        if "cargoship.engine._kube_access"
        in yaml.safe_load(documentation(path)).get("extends_documentation_fragment", [])
    )
    assert sorted(group) == with_api and "kubeconfig" in ARGUMENT_SPEC


def test_every_filter_is_documented_with_the_options_its_function_takes():
    """`ansible-doc -t filter` reads a filter's documentation from a YAML file named after it, beside the plugin
    file; a filter without one shows as UNDOCUMENTED. Its options must be the function's parameters, in order."""
    import inspect

    import yaml

    from ansible_collections.cargoship.engine.plugins.filter.phase_rules import FilterModule

    root = Path(__file__).resolve().parents[2] / "plugins" / "filter"
    filters = FilterModule().filters()
    assert sorted(path.stem for path in root.glob("*.yml")) == sorted(filters)
    for name, function in filters.items():
        doc = yaml.safe_load((root / f"{name}.yml").read_text())
        assert {"DOCUMENTATION", "EXAMPLES", "RETURN"} <= doc.keys(), name
        assert doc["DOCUMENTATION"]["name"] == name and f"cargoship.engine.{name}" in doc["EXAMPLES"]
        params = list(inspect.signature(function).parameters)
        options = doc["DOCUMENTATION"]["options"]
        assert list(options) == ["_input", *params[1:]], name
        positional = [p.strip() for p in doc["DOCUMENTATION"].get("positional", "").split(",") if p.strip()]
        assert positional == params[1:], name
        for param, option in zip(params[1:], list(options.values())[1:], strict=True):
            default = inspect.signature(function).parameters[param].default
            assert option.get("required", False) == (default is inspect.Parameter.empty), (name, param)
