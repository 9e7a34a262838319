"""Every inventory variable cargoship reads is written once, in plugins/plugin_utils/_run_options.py: its
kind (what validate_input checks), its default (the role defaults, the declared reads, the dry run, the
playbooks' keywords), its description (the argument specs, the docs). These tests fail when a copy drifts
or when a file restates a default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from test_survey import host_vars, templar

from ansible_collections.cargoship.engine.plugins.action import validate_input
from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import VARIABLES
from ansible_collections.cargoship.engine.plugins.plugin_utils import _run_options
from cargoship_runner import docs

REPO = Path(__file__).resolve().parents[2]
# Group names the fleet role makes (cargoship_controllers, cargoship_workers), not variables.
GROUPS_MADE = {"cargoship_controllers", "cargoship_workers"}
NAME = re.compile(r"\bcargoship_[a-z_]+\b")


def yaml_files():
    for folder in ("roles", "playbooks"):
        yield from sorted((REPO / folder).rglob("*.yml"))


def code(path: Path) -> str:
    """A YAML file without its comment lines and without the generated defaults block."""
    return docs._uncommented(path)


def test_every_variable_the_roles_and_playbooks_read_is_in_the_table_and_every_entry_is_read():
    read = set()
    for path in yaml_files():
        if path.parent.name == "meta":
            continue  # the argument specs are written from the table
        read |= set(NAME.findall(code(path)))
    read -= GROUPS_MADE
    # engine_config's from_inventory reads the desired state's variables (the table spells them once).
    assert any("from_inventory: true" in code(path) for path in yaml_files())
    read |= set(_run_options.DESIRED_STATE_ARGS.values())
    read |= {"cargoship_controllers_group", "cargoship_workers_group"}  # read by the fleet action (Python)
    table = set(_run_options.BY_NAME)
    assert read - table == set(), "read but not in the table (so neither validated nor documented)"
    assert table - read == set(), "in the table but read nowhere"


def test_no_file_restates_a_default_the_table_gives():
    literal = re.compile(r"\b(cargoship_[a-z_]+) \| default\((?!lookup\('cargoship\.engine\.run_option_default')")
    fixed = _run_options.defaults()
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for path in yaml_files()
        for name in literal.findall(code(path))
        if name in fixed
    ]
    assert not found
    # Python takes them from the table too: no `get("cargoship_...", <value>)` in the plugins.
    python = [
        f"{path.relative_to(REPO)}: {match}"
        for path in sorted((REPO / "plugins").rglob("*.py"))
        for match in re.findall(r"""get\(\s*["'](cargoship_[a-z_]+)["']\s*,""", path.read_text())
        if match in fixed
    ]
    assert not python


def test_validate_input_checks_every_variable_of_the_table_by_its_kind():
    assert validate_input.KNOWN == set(_run_options.BY_NAME)
    for option in _run_options.OPTIONS:
        if option.kind in ("desired", "engine"):
            assert option.name in VARIABLES.values()
        else:
            assert validate_input.OPTIONS[option.name] == option.kind
    # Each fixed default passes its own check.
    for name, value in _run_options.defaults().items():
        assert validate_input.option_problem(name, validate_input.OPTIONS[name], value, []) == [], name


def test_a_default_is_in_the_defaults_of_every_role_that_reads_it_and_nowhere_else():
    fixed = _run_options.defaults()
    for role in sorted(path for path in (REPO / "roles").iterdir() if path.is_dir()):
        read = docs.variables_read(role) & set(fixed)
        path = role / "defaults" / "main.yml"
        given = yaml.safe_load(path.read_text()) if path.is_file() else {}
        given = {name: value for name, value in (given or {}).items() if name.startswith("cargoship_")}
        assert given == {name: fixed[name] for name in read}, role.name


@pytest.mark.parametrize(("given", "expected"), [(None, (60, 30)), ((600, 120), (600, 120))])
def test_a_declared_read_takes_the_tables_default_unless_the_host_sets_the_variable(given, expected):
    """The lock phase's declared read, as the survey renders it for a host in the connect phase (where the
    lock role's own defaults do not apply)."""
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import read_of

    more = (
        {}
        if given is None
        else dict(zip(("cargoship_lock_stale_after", "cargoship_lock_touch_interval"), given, strict=True))
    )
    args = read_of("lock", templar(), host_vars("c1", **more))["args"]
    assert (int(args["stale_after"]), int(args["touch_interval"])) == expected


def test_the_lookup_gives_the_tables_default_and_refuses_a_name_without_one():
    from ansible.errors import AnsibleLookupError

    from ansible_collections.cargoship.engine.plugins.lookup.run_option_default import LookupModule

    lookup = LookupModule()
    assert lookup.run(["cargoship_work_concurrency", "cargoship_lock_stale_after"], variables={}) == [1, 60]
    with pytest.raises(AnsibleLookupError, match="cargoship_registries: not a cargoship variable with a fixed"):
        lookup.run(["cargoship_registries"], variables={})


def test_the_docs_table_has_a_row_per_variable_with_its_default():
    table = _run_options.markdown_table()
    for option in _run_options.OPTIONS:
        assert f"| `{option.name}` |" in table
    assert "| `cargoship_drain_timeout` | `300` |" in table
    assert "| `cargoship_engine` | required |" in table
    assert "C(" not in table and "V(" not in table


def test_the_desired_state_is_taken_from_the_inventory_as_the_sync_reads_take_it():
    """engine_config's from_inventory (the writes of node_sync) gives the module what the sync phase's
    declared read gives it: every desired-state variable the host sets, nothing it does not set, the chart
    values only where the call manages the charts; the task's own arguments win."""
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import read_of, with_inventory

    variables = host_vars("c1", cargoship_secret_paths=["traefik.a.b"])
    for phase, role, charts in (("sync_controller", "server", True), ("sync_worker", "agent", False)):
        read = read_of(phase, templar(), variables)["args"]
        written = with_inventory(
            {"from_inventory": True, "node_role": role, "with_charts": charts, "state": "staged"}, templar(), variables
        )
        assert "from_inventory" not in written and "from_inventory" not in read
        assert {k: v for k, v in written.items() if k != "state"} == {k: v for k, v in read.items() if k != "layout"}
        assert written["registries"] == variables["cargoship_registries"]
        assert written["secret_paths"] == ["traefik.a.b"]
        assert "audit_policy" not in written  # the inventory does not set it: left as the hosts have it
        assert ("chart_values" in written) is charts  # chart values never travel to a worker
    overridden = with_inventory({"from_inventory": True, "engine": "rke2"}, templar(), variables)
    assert overridden["engine"] == "rke2"
    # Without from_inventory nothing is added.
    assert with_inventory({"from_inventory": False, "engine": "k3s"}, templar(), variables) == {"engine": "k3s"}
