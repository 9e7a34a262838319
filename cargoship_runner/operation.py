"""One run of an operation's playbook from the command line: ask before a real run, check the
inventory files, run, show the report, put back what an interruption left, and exit as the exit
policy says. The command definitions (cli.py) call ``execute``."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import click
import yaml

from cargoship_runner.exit_policy import EXIT_FAILED, EXIT_USAGE, ending
from cargoship_runner.output import console, errors
from cargoship_runner.preflight import malformed_yaml
from cargoship_runner.progress import Progress
from cargoship_runner.recovery import recover, release_own_locks
from cargoship_runner.render import render_diffs, render_report
from cargoship_runner.runner import RunOptions, run_playbook


def execute(
    title,
    extravars,
    inventory,
    dry_run,
    confirm,
    concurrency,
    work_concurrency,
    limit,
    vault_password_file,
    vault_ids,
    show_diff,
    output,
    report_json,
    keep_artifacts,
    detailed_exitcode,
    verbose,
    extra_vars=(),
    changes_hosts=True,
):
    """One run of the engine-config-sync playbook (all of it, or one phase): confirm, run, report, exit."""
    user_vars, user_var_files = parse_extra_vars(extra_vars)
    if output == "auto":
        output = "table" if sys.stdout.isatty() else "plain"
    if output == "plain":
        # Not a terminal: lines as long as they are, never folded at 80 columns.
        console.soft_wrap = True
    if not dry_run and not confirm and changes_hosts:
        if not sys.stdin.isatty():
            errors.print("a real run changes hosts: pass --confirm (or use --dry-run to see what would change)")
            sys.exit(EXIT_USAGE)
        if not click.confirm("This may restart the engine on drifted nodes. Continue?", default=False):
            sys.exit(EXIT_USAGE)
    for source in inventory:
        check_inventory(source)
    extravars = {"cargoship_work_concurrency": work_concurrency, **extravars}
    if report_json == Path("-"):
        console.file = sys.stderr  # standard output carries the JSON report alone
    options = RunOptions(
        "engine_config_sync",
        inventory,
        dry_run,
        limit,
        concurrency,
        extravars,
        vault_password_file,
        verbose,
        keep_artifacts,
        user_vars,
        user_var_files,
        vault_ids,
    )
    names = ", ".join(str(path) for path in inventory)
    console.print(f"cargoship {title} — {'dry run' if dry_run else 'real run'} on {names}", markup=False)
    progress = Progress(verbose)
    outcome = run_playbook(options, progress)
    if outcome.report:
        render_report(outcome.report, output)
        if show_diff:
            render_diffs(outcome.report)
        if report_json:
            write_report(outcome.report, report_json)
    if outcome.artifacts:
        errors.print(f"the run's ansible-runner directory is kept in {outcome.artifacts}", markup=False)
    if not outcome.report and not outcome.interrupted:
        errors.print(f"ansible-playbook ended (rc={outcome.rc}) before producing a report:")
        for line in outcome.ansible_errors or ["(no error message; rerun with -v to see Ansible's output)"]:
            errors.print(f"  {line}", markup=False)
    if outcome.log:
        errors.print(f"Ansible's output of this run is kept in {outcome.log}", markup=False)
    for node, state in ((outcome.report or {}).get("nodes_left_mid_sync") or {}).items():
        errors.print(
            f"{node} was lost in the middle of its sync, during {state['lost_during']}. {state['state']}. "
            f"{state['resume']}",
            markup=False,
        )
    if outcome.keeper_stop:
        errors.print(outcome.keeper_stop, markup=False)
    if outcome.interrupted and progress.in_flight:
        recover(options, outcome.run_id, progress.in_flight)
    if not dry_run and outcome.rc != 0 and progress.locking and not locks_released(outcome.report):
        # The playbook releases its locks itself after a failure; not after Ctrl-C, nor when a host it
        # lost took the others down with it (no host was left to run the release).
        release_own_locks(options, outcome.run_id)
    end = ending(
        rc=outcome.rc,
        report=outcome.report,
        interrupted=outcome.interrupted,
        unreachable=outcome.unreachable,
        dry_run=dry_run,
        detailed_exitcode=detailed_exitcode,
    )
    if end.message:
        errors.print(end.message, markup=False)
    sys.exit(end.code)


def locks_released(report: dict | None) -> bool:
    """Whether the run's own lock release ran (the phase that releases what the lock phase took)."""
    return any(
        p["name"] == "unlock" and p["status"] in ("ran", "nothing to do") for p in (report or {}).get("phases", [])
    )


def parse_extra_vars(values: tuple[str, ...]) -> tuple[dict, tuple[str, ...]]:
    """-e values as ansible-playbook reads them: KEY=VALUE pairs (strings) or a YAML/JSON mapping, and
    @FILE, which is handed to ansible-playbook by its path (a vaulted file stays Ansible's to read)."""
    merged: dict = {}
    files: list[str] = []
    for value in values:
        text = value.strip()
        if text.startswith("@"):
            path = Path(text[1:]).expanduser()
            if not path.is_file():
                errors.print(f"-e {value!r}: no such file")
                sys.exit(EXIT_USAGE)
            files.append(str(path.resolve()))
            continue
        try:
            data = yaml.safe_load(text) if text.startswith(("{", "---")) else dict(shlex_pairs(text))
        except (yaml.YAMLError, ValueError) as exc:
            errors.print(f"-e {value!r}: {exc.__class__.__name__}: cannot read it as KEY=VALUE, YAML or @FILE")
            sys.exit(EXIT_USAGE)
        if not isinstance(data, dict):
            errors.print(f"-e {value!r}: expected KEY=VALUE pairs or a mapping")
            sys.exit(EXIT_USAGE)
        merged.update(data)
    return merged, tuple(files)


def shlex_pairs(text: str):
    for word in shlex.split(text):
        key, sep, item = word.partition("=")
        if not sep or not key:
            raise ValueError(f"{word!r} is not KEY=VALUE")
        yield key, item


def write_report(report: dict, destination: Path) -> None:
    """The JSON report, to standard output or to a file that is never readable by others, not even while
    it is written (it holds diffs of the engine files)."""
    text = json.dumps(report, indent=2) + "\n"
    if destination == Path("-"):
        sys.stdout.write(text)
        return
    target = destination.resolve()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_inventory(inventory: Path) -> None:
    """Malformed inventory files are named here, before Ansible starts (which would not name them)."""
    problems = malformed_yaml(inventory)
    for problem in problems:
        errors.print(problem, markup=False)
    if problems:
        errors.print("nothing was run: fix the inventory first")
        sys.exit(EXIT_FAILED)
