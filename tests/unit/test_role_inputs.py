"""The playbook includes its roles without checking their argument specs again on every host
(rolespec_validate: false): that is safe only while validate_input, which runs once before any host is
touched, checks every cargoship_* option those specs declare, with a type that agrees."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.cargoship.engine.plugins.action import validate_input

REPO = Path(__file__).resolve().parents[2]
# What validate_input's kinds accept, as the argument spec types they stand for.
AGREES = {
    "bool": {"bool"},
    "int": {"int"},
    "timeout": {"int"},
    "str": {"str"},
    "path": {"path"},
    "profile": {"str"},
    "concurrency": {"str", "raw"},
    "hooks": {"dict", "raw"},
    "phase": {"str"},
    "secret_paths": {"list"},
    "restart": {"str"},
}


def declared_options():
    for path in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        for entry, spec in (yaml.safe_load(path.read_text())["argument_specs"] or {}).items():
            for name, option in (spec.get("options") or {}).items():
                yield f"{path.parent.parent.name}:{entry}", name, option


def test_every_cargoship_option_of_a_role_is_validated_before_any_host_is_touched():
    checked = 0
    for where, name, option in declared_options():
        if not name.startswith("cargoship_"):
            continue  # a helper role's own inputs, set by the collection's tasks
        checked += 1
        assert name in validate_input.KNOWN, f"{where}: {name} is not checked by validate_input"
        if name in validate_input.OPTIONS:
            kind = validate_input.OPTIONS[name]
            assert option.get("type", "str") in AGREES[kind], (
                f"{where}: {name} is {option.get('type')}, validate_input checks {kind}"
            )
        elif name == "cargoship_engine":
            assert option.get("type") == "str" and set(option.get("choices") or ()) <= {"k3s", "rke2"}, where
        else:
            assert option.get("type") in ("dict", "raw"), f"{where}: {name} is a desired-state document"
    assert checked >= 20


def test_the_playbooks_roles_are_included_without_checking_their_specs_again():
    playbook = yaml.safe_load((REPO / "playbooks" / "engine_config_sync.yml").read_text())
    includes = [
        task["ansible.builtin.include_role"]
        for play in playbook
        for task in play.get("tasks") or []
        for inner in (task.get("block") or []) + (task.get("rescue") or [])
        for task in [inner]
        if "ansible.builtin.include_role" in task
    ]
    assert includes and all(include.get("rolespec_validate") is False for include in includes)
    # validate_input runs in the play right after the fleet is found, once, on the control host, before
    # the first play that contacts a host.
    validation = playbook[1]["tasks"][0]
    assert "cargoship.engine.validate_input" in validation and validation["run_once"] is True
    assert validation["delegate_to"] == "localhost"
