"""What users of Ansible and of infrastructure tools expect of a command line."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from cargoship_runner import cli, operation
from cargoship_runner.runner import RunOutcome, masked_output

COMMANDS = [[], ["engine-config-sync"], ["phase"], ["phase", "list"], ["phase", "run"], ["unlock"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "cargoship")
def test_every_help_shows_examples(command):
    result = CliRunner().invoke(cli.main, [*command, "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output
    examples = result.output.split("Examples:", 1)[1]
    assert "cargoship " in examples


def test_phase_names_complete_in_the_shell():
    from click.shell_completion import ShellComplete

    completion = ShellComplete(cli.main, {}, "cargoship", "_CARGOSHIP_COMPLETE")
    names = [item.value for item in completion.get_completions(["phase", "run"], "sync_")]
    assert names == ["sync_controller", "sync_worker"]


class Recorder:
    """Stands in for run_playbook: records what would have been run, reports one finished phase."""

    def __init__(self):
        self.calls = []

    def __call__(self, options, on_event=None):
        self.calls.append(options)
        report = {"schema_version": 1, "operation": "x", "dry_run": options.dry_run, "work_found": False, "phases": []}
        return RunOutcome(rc=0, report=report, unreachable=[], run_id="RUN", interrupted=False)


@pytest.fixture
def recorder(monkeypatch):
    recorder = Recorder()
    monkeypatch.setattr(cli, "run_playbook", recorder)  # unlock
    monkeypatch.setattr(operation, "run_playbook", recorder)  # the runs of an operation
    return recorder


def test_a_read_only_phase_runs_alone_without_confirm(recorder, tmp_path):
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    result = CliRunner().invoke(cli.main, ["phase", "run", "host_facts", "-i", str(tmp_path / "hosts.yml")])
    assert result.exit_code == 0, result.output
    assert [(o.playbook, o.dry_run, o.extravars["cargoship_phase"]) for o in recorder.calls] == [
        ("engine_config_sync", False, "host_facts")
    ]


def test_a_phase_that_changes_hosts_needs_confirm(recorder, tmp_path):
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    result = CliRunner().invoke(cli.main, ["phase", "run", "sync_worker", "-i", str(tmp_path / "hosts.yml")])
    assert result.exit_code == 64
    assert "pass --confirm" in result.output
    assert recorder.calls == []


def test_unlock_asks_and_without_a_terminal_needs_yes(recorder, tmp_path):
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    result = CliRunner().invoke(cli.main, ["unlock", "-i", str(tmp_path / "hosts.yml")])
    assert result.exit_code == 64
    assert "pass --yes" in result.output
    assert recorder.calls == []
    result = CliRunner().invoke(cli.main, ["unlock", "-i", str(tmp_path / "hosts.yml"), "--yes"])
    assert result.exit_code == 0, result.output
    assert recorder.calls[0].extravars == {"cargoship_unlock_force": True}


def test_several_inventories_and_vault_ids_reach_the_run(recorder, tmp_path):
    for name in ("hosts.yml", "state.yml"):
        (tmp_path / name).write_text("all: {}\n")
    args = ["engine-config-sync", "--dry-run", "-i", str(tmp_path / "hosts.yml"), "-i", str(tmp_path / "state.yml")]
    result = CliRunner().invoke(cli.main, [*args, "--vault-id", "prod@prompt", "--vault-id", "dev@/etc/dev.pass"])
    assert result.exit_code == 0, result.output
    options = recorder.calls[0]
    assert options.inventories == (tmp_path / "hosts.yml", tmp_path / "state.yml")
    assert options.vault_ids == ("prod@prompt", "dev@/etc/dev.pass")
    assert options.inventory_args() == f"-i {tmp_path / 'hosts.yml'} -i {tmp_path / 'state.yml'}"


def test_not_on_a_terminal_the_report_is_plain_lines_never_folded(recorder, tmp_path, monkeypatch):
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    long_host = "worker-with-a-name-much-longer-than-any-terminal-is-wide-" + "x" * 80
    report = {
        "schema_version": 1,
        "operation": "engine-config-sync",
        "dry_run": True,
        "work_found": True,
        "phases": [
            {
                "name": "sync_worker",
                "title": "t",
                "dry_run_label": "reported, not run",
                "status": "would run",
                "hosts": {long_host: {"status": "would run", "changes": ["restart k3s"]}},
            }
        ],
    }
    outcome = RunOutcome(rc=0, report=report, unreachable=[], run_id="R", interrupted=False)
    monkeypatch.setattr(operation, "run_playbook", lambda options, on_event=None: outcome)
    result = CliRunner().invoke(cli.main, ["engine-config-sync", "--dry-run", "-i", str(tmp_path / "hosts.yml")])
    line = next(line for line in result.output.splitlines() if "sync_worker" in line)
    assert f"{long_host}: restart k3s" in line
    assert "│" not in result.output  # no table drawing in a log


def test_ansibles_quoted_source_lines_are_withheld():
    text = (
        "TASK [x] ***\n"
        "[ERROR]: conflicting action statements: ansible.builtin.debug, password\n"
        "Origin: /inv/group_vars/all.yml:4:7\n"
        "\n"
        "3   registry_password: hunter2\n"
        "4     - ansible.builtin.debug: msg=hi\n"
        "        ^ column 7\n"
        "\n"
        "PLAY RECAP ***\n"
    )
    masked = masked_output(text)
    assert "hunter2" not in masked
    assert "Origin: /inv/group_vars/all.yml:4:7" in masked
    assert "withheld" in masked
    assert masked.splitlines()[-1] == "PLAY RECAP ***"


def test_the_inventorys_own_switches_stand_unless_the_command_line_says_otherwise(recorder, tmp_path):
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    inventory = ["-i", str(tmp_path / "hosts.yml")]
    CliRunner().invoke(cli.main, ["engine-config-sync", "--dry-run", *inventory])
    CliRunner().invoke(cli.main, ["engine-config-sync", "--dry-run", *inventory, "--label-nodes", "--no-kubeconfig"])
    CliRunner().invoke(cli.main, ["phase", "run", "kubeconfig", "--dry-run", *inventory])
    plain, switched, phase = (o.extravars for o in recorder.calls)
    assert "cargoship_label_nodes" not in plain and "cargoship_kubeconfig_update" not in plain
    assert switched["cargoship_label_nodes"] is True and switched["cargoship_kubeconfig_update"] is False
    # The phase asked for by name: the role itself turns on for it (as with ansible-playbook -e cargoship_phase).
    assert phase["cargoship_phase"] == "kubeconfig" and "cargoship_kubeconfig_update" not in phase


def test_an_errors_own_further_lines_are_kept_and_the_quoted_source_still_withheld(tmp_path):
    """A run that ends before its report shows Ansible's error lines: a message of several lines (every
    problem of an input check) whole, never the source lines quoted under its origin."""
    from cargoship_runner.runner import error_lines, masked_stdout

    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "stdout").write_text(
        "TASK [Validate] ***\n"
        "[ERROR]: Task failed: Action failed: invalid input (2 problems); no host was contacted:\n"
        "  - cargoship_phase: unknown phase 'nope' (every host)\n"
        "  - cargoship_drain_timeout: expected a whole number of seconds, got 'x' (every host)\n"
        "Origin: /inv/group_vars/all.yml:4:7\n"
        "\n"
        "3   registry_password: hunter2\n"
        "        ^ column 7\n"
        "fatal: [c1 -> localhost]: FAILED! =>\n"
        "    msg: invalid input\n"
    )
    finished = SimpleNamespace(config=SimpleNamespace(artifact_dir=str(artifacts)))
    assert error_lines(masked_stdout(finished)) == [
        "[ERROR]: Task failed: Action failed: invalid input (2 problems); no host was contacted:",
        "  - cargoship_phase: unknown phase 'nope' (every host)",
        "  - cargoship_drain_timeout: expected a whole number of seconds, got 'x' (every host)",
        "Origin: /inv/group_vars/all.yml:4:7",
    ]
