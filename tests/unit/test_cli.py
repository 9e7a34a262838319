from __future__ import annotations

from click.testing import CliRunner

from cargoship_runner import __version__
from cargoship_runner.cli import main
from cargoship_runner.progress import Progress


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


def ok(host: str, res: dict, task: str = "any name") -> dict:
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": task, "role": "x.node_sync", "res": res}}


def test_nodes_in_flight_follow_the_node_states_the_steps_return_whatever_the_tasks_are_called():
    progress = Progress()
    for host, res in [
        ("w1", {"ansible_facts": {"node_sync_state": "draining"}}),
        ("w1", {"node_state": "drained"}),
        ("w1", {"node_state": "stopped"}),
        # w3 had nothing to restart: its window never opened, whatever its other results say.
        ("w3", {"node_state": "written"}),
        ("w2", {"ansible_facts": {"node_sync_state": "draining"}}),
        ("w2", {"node_state": "drained"}),
        ("w2", {"node_state": "uncordoned"}),
    ]:
        progress(ok(host, res, task=f"renamed task {len(res)}"))
    assert progress.in_flight == ["w1"]


def test_progress_has_a_line_per_phase_and_a_line_per_node_only_where_nodes_go_one_by_one(capsys):
    progress = Progress()
    for phase in ("connect", "sync_worker"):
        for host in ("w1", "w2", "w3"):
            progress({"event": "runner_on_ok", "event_data": {"host": host, "task": "t", "role": f"x.{phase}"}})
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines == [["connect"], ["sync_worker", "w1"], ["sync_worker", "w2"], ["sync_worker", "w3"]]


def test_a_failure_is_shown_once_and_not_again_in_the_runs_closing_restatement(capsys):
    """The playbook ends a failed run with "the run stopped after a failure: <host>: <what failed>", which the
    report's error line says too: the progress shows each failure once, and every different one."""
    progress = Progress()

    def failed(host: str, task: str, msg: str) -> None:
        progress({"event": "runner_on_failed", "event_data": {"host": host, "task": task, "res": {"msg": msg}}})

    failed("w2", "Stop the engine", "")  # a failure without a message hides none of the others
    failed("c1", "Check the reviewed plan", "the plan is stale")
    failed("w1", "Drain the node", "a budget refuses")
    failed("c1", "End the run failed if a phase failed", "the run stopped after a failure: c1: the plan is stale")
    shown = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0].strip() for line in shown] == [
        "Stop the engine failed on w2",
        "Check the reviewed plan failed on c1",
        "Drain the node failed on w1",
    ]


def test_extra_vars_are_read_as_ansible_playbook_reads_them(tmp_path):
    from cargoship_runner.operation import parse_extra_vars

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


def test_every_unreadable_extra_var_is_a_usage_error_named_by_its_place_never_its_text(tmp_path):
    args = ["engine-config-sync", "-i", ".", "--dry-run"]
    for value in (
        "cargoship_force=true",
        "token=hunter2-c4n4ry stray-hunter2",
        '{"password": "hunter2-c4n4ry"',
        "[hunter2-c4n4ry]",
        f"@{tmp_path}/missing.yml",
        "unclosed='hunter2-c4n4ry",
    ):
        args += ["-e", value]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 64
    assert "hunter2" not in result.output
    lines = result.output.splitlines()
    assert lines[:5] == [
        "-e #2: word 2 is not KEY=VALUE",
        "-e #3: not valid YAML or JSON at column 30",
        "-e #4: expected a mapping, got list",
        f"-e #5 (@{tmp_path}/missing.yml): no such file",
        "-e #6: cannot split it into words (No closing quotation)",
    ], result.output
