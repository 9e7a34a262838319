from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cargoship_runner import __version__
from cargoship_runner.cli import Progress, lost_nodes, main
from cargoship_runner.runner import RunOptions


def test_version_names_the_program_and_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"cargoship {__version__}"


def test_help_explains_the_tool():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "k3s or RKE2" in result.output
    assert "shows exactly what it would do" in " ".join(result.output.split())


def test_unknown_command_is_an_error():
    result = CliRunner().invoke(main, ["no-such-command"])
    assert result.exit_code == 2
    assert "No such command" in result.output


def event(kind: str, host: str, task: str, res: dict | None = None) -> dict:
    return {
        "event": kind,
        "event_data": {"host": host, "task": task, "role": "cargoship.engine.node_sync", "res": res or {}},
    }


def test_a_node_lost_mid_sync_is_reported_with_how_far_it_got_and_how_to_finish_it():
    progress = Progress()
    for kind, host, task in [
        ("runner_on_start", "w1", "Drain the node"),
        ("runner_on_ok", "w1", "Drain the node"),
        ("runner_on_start", "w1", "Stop the engine"),
        ("runner_on_ok", "w1", "Stop the engine"),
        ("runner_on_start", "w1", "Put the new configuration in place"),
        # w3 had nothing to restart: Ansible announces the drain, then skips it.
        ("runner_on_start", "w3", "Drain the node"),
        ("runner_on_skipped", "w3", "Drain the node"),
        ("runner_on_start", "w3", "Mark this node's sync done"),
        # w2 went through the whole window and was given back.
        ("runner_on_start", "w2", "Drain the node"),
        ("runner_on_ok", "w2", "Drain the node"),
        ("runner_on_start", "w2", "Uncordon the node"),
    ]:
        progress(event(kind, host, task))
    progress(event("runner_on_ok", "w2", "Uncordon the node", {"ready": True}))
    lost = lost_nodes(RunOptions("engine_config_sync", Path("inv.yml")), "RUN1", progress)
    assert list(lost) == ["w1"]
    assert lost["w1"]["lost_during"] == "Put the new configuration in place"
    assert lost["w1"]["state"] == "Done before: cordoned and drained by this run; engine stopped"
    assert (
        "ansible-playbook -i inv.yml cargoship.engine.recover -e cargoship_run_id=RUN1 --limit w1"
        in lost["w1"]["resume"]
    )


def test_progress_has_a_line_per_phase_and_a_line_per_node_only_where_nodes_go_one_by_one(capsys):
    progress = Progress()
    for phase in ("connect", "sync_worker"):
        for host in ("w1", "w2", "w3"):
            progress({"event": "runner_on_ok", "event_data": {"host": host, "task": "t", "role": f"x.{phase}"}})
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines == [["connect"], ["sync_worker", "w1"], ["sync_worker", "w2"], ["sync_worker", "w3"]]


def test_extra_vars_are_read_as_ansible_playbook_reads_them(tmp_path):
    from cargoship_runner.cli import parse_extra_vars

    varsfile = tmp_path / "vars.yml"
    varsfile.write_text("cargoship_drain_timeout: 60\n")
    parsed, files = parse_extra_vars(
        (
            "cargoship_controllers_group=server cargoship_workers_group=agent",
            '{"cargoship_force": true}',
            f"@{varsfile}",
        )
    )
    assert parsed == {
        "cargoship_controllers_group": "server",
        "cargoship_workers_group": "agent",
        "cargoship_force": True,
    }
    # A file goes to ansible-playbook by its path: its content (maybe vaulted) is never copied by the command.
    assert files == (str(varsfile.resolve()),)


def test_an_unreadable_extra_var_is_a_usage_error():
    result = CliRunner().invoke(main, ["engine-config-sync", "-i", ".", "--dry-run", "-e", "no-equals-sign"])
    assert result.exit_code == 64
    assert "-e 'no-equals-sign'" in result.output
