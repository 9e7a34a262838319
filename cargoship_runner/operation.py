"""One run of an operation's playbook from the command line: ask before a real run, check the
inventory files, run, show the report, put back what an interruption left, and exit as the exit
policy says. The command definitions (cli.py) call ``execute``."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from cargoship_runner import __version__
from cargoship_runner.collection import phases
from cargoship_runner.exit_policy import EXIT_FAILED, EXIT_USAGE, ending
from cargoship_runner.output import console, errors, styled
from cargoship_runner.preflight import malformed_yaml
from cargoship_runner.progress import Progress
from cargoship_runner.recovery import recover, release_own_locks
from cargoship_runner.render import render_diffs, render_report
from cargoship_runner.runner import RunOptions, run_playbook


@dataclass(kw_only=True)
class CommandLine:
    """What the user asked for on the command line (the run options every run command takes, cli.py)."""

    inventory: tuple[Path, ...]
    dry_run: bool
    confirm: bool
    concurrency: int | None
    work_concurrency: str | None
    limit: str | None
    ask_become_pass: bool
    ask_vault_pass: bool
    vault_password_file: Path | None
    vault_ids: tuple[str, ...]
    show_diff: bool
    output: str
    report_json: Path | None
    keep_artifacts: bool
    detailed_exitcode: bool
    verbose: int
    extra_vars: tuple[str, ...] = ()


def execute(title: str, extravars: dict, asked: CommandLine, changes_hosts: bool = True) -> None:
    """One run of the engine-config-sync playbook (all of it, or one phase): confirm, run, report, exit."""
    if asked.dry_run and asked.confirm:
        usage_error(
            "--dry-run and --confirm contradict each other: --dry-run changes nothing, --confirm does the real run"
        )
    if asked.report_json and asked.report_json != Path("-"):
        check_report_path(asked.report_json)
    user_vars, user_var_files = parse_extra_vars(asked.extra_vars)
    passwords = ask_passwords(asked.ask_become_pass, asked.ask_vault_pass)
    output = asked.output
    if output == "auto":
        output = "table" if sys.stdout.isatty() else "plain"
    if output == "plain":
        # Not a terminal: lines as long as they are, never folded at 80 columns.
        console.soft_wrap = True
    if not asked.dry_run and not asked.confirm and changes_hosts:
        if not sys.stdin.isatty():
            errors.print("a real run changes hosts: pass --confirm (or use --dry-run to see what would change)")
            sys.exit(EXIT_USAGE)
        if not click.confirm("This may restart the engine on drifted nodes. Continue?", default=False):
            sys.exit(EXIT_USAGE)
    for source in asked.inventory:
        check_inventory(source)
    # Only what the user passed here: otherwise the inventory's cargoship_work_concurrency stands.
    if asked.work_concurrency is not None:
        extravars = {"cargoship_work_concurrency": asked.work_concurrency, **extravars}
    if asked.report_json == Path("-"):
        console.file = sys.stderr  # standard output carries the JSON report alone
    options = RunOptions(
        playbook="engine_config_sync",
        inventory=asked.inventory,
        dry_run=asked.dry_run,
        limit=asked.limit,
        forks=asked.concurrency,
        extravars=extravars,
        vault_password_file=asked.vault_password_file,
        verbosity=asked.verbose,
        keep_artifacts=asked.keep_artifacts,
        user_vars=user_vars,
        user_var_files=user_var_files,
        vault_ids=asked.vault_ids,
        passwords=passwords,
    )
    names = ", ".join(str(path) for path in asked.inventory)
    console.print(f"cargoship {title} — {'dry run' if asked.dry_run else 'real run'} on {names}")
    progress = Progress(asked.verbose)
    outcome = run_playbook(options, progress)
    if outcome.report:
        render_report(outcome.report, output)
        if asked.show_diff:
            render_diffs(outcome.report)
    tell_plan(outcome.report, extravars, asked)
    report = outcome.report or stand_in_report(title, asked.dry_run, outcome)
    if asked.report_json:
        write_report(report, asked.report_json)
    if outcome.artifacts:
        errors.print(f"the run's ansible-runner directory is kept in {outcome.artifacts}")
    if not outcome.report and not outcome.stopped_early:
        errors.print(f"ansible-playbook ended (rc={outcome.rc}) before producing a report:")
        for line in outcome.ansible_errors or ["(no error message; rerun with -v to see Ansible's output)"]:
            errors.print(f"  {line}")
    # A whole vaulted file stops Ansible before the report; a vaulted value, the input check, in the report.
    reported = [str(e.get("message", "")) for e in (outcome.report or {}).get("errors") or [] if isinstance(e, dict)]
    for hint in hints(outcome.ansible_errors + reported):
        errors.print(hint)
    if outcome.log:
        errors.print(f"Ansible's output of this run is kept in {outcome.log}")
    for node, state in ((outcome.report or {}).get("nodes_left_mid_sync") or {}).items():
        errors.print(
            f"{node} was lost in the middle of its sync, during {state['lost_during']}. {state['state']}. "
            f"{state['resume']}"
        )
    if outcome.keeper_stop:
        errors.print(outcome.keeper_stop)
    if outcome.handler_error:
        errors.print(
            f"cargoship stopped the run: its handling of Ansible's events failed ({outcome.handler_error}); "
            "the nodes it had started on are put back and its locks released"
        )
    if outcome.stopped_early and progress.in_flight:
        recover(options, outcome.run_id, progress.in_flight)
    if not asked.dry_run and outcome.rc != 0 and progress.locking and not locks_released(outcome.report):
        # The playbook releases its locks itself after a failure; not after Ctrl-C, nor when a host it
        # lost took the others down with it (no host was left to run the release).
        release_own_locks(options, outcome.run_id)
    end = ending(
        rc=outcome.rc,
        report=outcome.report,
        interrupted=outcome.interrupted,
        handler_failed=outcome.handler_error is not None,
        unreachable=outcome.unreachable,
        dry_run=asked.dry_run,
        detailed_exitcode=asked.detailed_exitcode,
    )
    if end.message:
        errors.print(end.message)
    sys.exit(end.code)


def tell_plan(report: dict | None, extravars: dict, asked: CommandLine) -> None:
    """After a dry run asked to write a plan: where it is, its digest, and how to apply exactly it."""
    if not extravars.get("cargoship_plan_out"):
        return
    plan = (report or {}).get("plan") or {}
    if not plan.get("written"):
        errors.print("no plan was written: the dry run did not go through (see above)")
        return
    console.print(
        styled("plan written to ", (plan["file"], "bold"), "; its digest: ", (plan["digest"], "bold")), soft_wrap=True
    )
    inventories = " ".join(f"-i {shlex.quote(str(path))}" for path in asked.inventory)
    console.print(
        styled(
            "apply exactly this plan, once reviewed: cargoship engine-config-sync ",
            f"{inventories} --plan {shlex.quote(plan['file'])} --expect-digest {plan['digest']} --confirm",
        ),
        soft_wrap=True,
    )


def usage_error(message: str) -> None:
    errors.print(f"cargoship: {message}")
    sys.exit(EXIT_USAGE)


def check_report_path(destination: Path, option: str = "--report-json") -> None:
    """--report-json FILE (--plan-out FILE) is checked before the run: a file that cannot be written is known at
    once, not after the nodes were restarted."""
    target = destination.expanduser()
    directory = target.parent if str(target.parent) else Path(".")
    if target.is_symlink():
        usage_error(f"{option} {destination}: is a symbolic link; name the file itself")
    if target.is_dir():
        usage_error(f"{option} {destination}: is a directory; name a file")
    if not directory.is_dir():
        usage_error(f"{option} {destination}: no such directory {directory}")
    if not os.access(directory, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        usage_error(f"{option} {destination}: not writable")


def ask_passwords(become: bool, vault: bool) -> dict:
    """-K and --ask-vault-pass: asked here, on the terminal, before anything runs; answered to
    ansible-playbook's own prompts (never written to the run's files)."""
    if not (become or vault):
        return {}
    if not sys.stdin.isatty():
        usage_error(
            "-K / --ask-vault-pass ask on a terminal and there is none: use --vault-password-file, or the become "
            "password in a vaulted variable (ansible_become_password)"
        )
    answers = {}
    if become:
        answers["become"] = click.prompt("BECOME password", hide_input=True, default="", show_default=False)
    if vault:
        answers["vault"] = click.prompt("Vault password", hide_input=True)
    return answers


def stand_in_report(title: str, dry_run: bool, outcome) -> dict:
    """The JSON report of a run that ended before the report callback wrote one: what is known of it."""
    why = "interrupted" if outcome.stopped_early else f"ansible-playbook ended (rc={outcome.rc}) before its report"
    return {
        "schema_version": 1,
        "operation": "engine-config-sync",
        **({"selected_phase": title.split()[-1]} if title.startswith("phase ") else {}),
        "version": __version__,
        "run_id": outcome.run_id,
        "dry_run": dry_run,
        "work_found": False,
        "hosts": {host: {"status": "unreachable"} for host in outcome.unreachable},
        "phases": [],
        "errors": [{"message": line} for line in [why, *outcome.ansible_errors]],
    }


def locks_released(report: dict | None) -> bool:
    """Whether the run's own lock release ran (the phase declared to release what the locking phase took)."""
    releasing = {p["name"] for p in phases() if p.get("run_lock") == "releases"}
    return any(
        p["name"] in releasing and p["status"] in ("ran", "nothing to do") for p in (report or {}).get("phases", [])
    )


# Ansible's words for slips it finds before any host is contacted, and what to do about each.
HINTS = {
    "no vault secrets found": "the inventory holds vaulted values: give their password with --ask-vault-pass, "
    "--vault-password-file FILE or --vault-id",
    "Decryption failed": "a vaulted value does not open with the password given: check --vault-password-file "
    "or --vault-id (one per vault id the inventory uses)",
    # Ansible templates every string of the inventory: a password or a URL holding {{, {% or {# fails to read.
    "Syntax error in template": "Ansible reads a value holding {{, {% or {# as a template: a value meant as it "
    "is written (a password, say) is marked in YAML with !unsafe, as in  password: !unsafe 'ab{{cd'",
}


def hints(lines: list[str]) -> list[str]:
    return [hint for words, hint in HINTS.items() if any(words in line for line in lines)]


def parse_extra_vars(values: tuple[str, ...]) -> tuple[dict, tuple[str, ...]]:
    """-e values as ansible-playbook reads them: KEY=VALUE pairs (strings) or a YAML/JSON mapping, and
    @FILE, which is handed to ansible-playbook by its path (a vaulted file stays Ansible's to read). Every
    -e that cannot be read is named at once, by its place on the command line and never by its text (it
    may hold a credential)."""
    merged: dict = {}
    files: list[str] = []
    problems: list[str] = []
    for number, value in enumerate(values, start=1):
        where = f"-e #{number}" if len(values) > 1 else "-e"
        text = value.strip()
        if text.startswith("@"):
            path = Path(text[1:]).expanduser()
            if not path.is_file():
                problems.append(f"{where} (@{text[1:]}): no such file")
            else:
                files.append(str(path.resolve()))
            continue
        if text.startswith(("{", "[", "---")):
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                at = f" at column {mark.column + 1}" if mark is not None and mark.line == 0 else ""
                problems.append(f"{where}: not valid YAML or JSON{at}")
                continue
            if not isinstance(data, dict):
                problems.append(f"{where}: expected a mapping, got {type(data).__name__}")
                continue
        else:
            try:
                data = dict(shlex_pairs(text))
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
                continue
        merged.update(data)
    if problems:
        for problem in problems:
            errors.print(problem)
        errors.print("(-e takes KEY=VALUE pairs, a YAML or JSON mapping, or @FILE)")
        sys.exit(EXIT_USAGE)
    return merged, tuple(files)


def shlex_pairs(text: str):
    """KEY=VALUE words; an error names the word's place and key, never its value."""
    try:
        words = shlex.split(text)
    except ValueError as exc:  # an unclosed quote
        raise ValueError(f"cannot split it into words ({exc})") from None
    for place, word in enumerate(words, start=1):
        key, sep, item = word.partition("=")
        if not sep or not key:
            raise ValueError(f"word {place} is not KEY=VALUE")
        yield key, item


def write_report(report: dict, destination: Path) -> None:
    """The JSON report, to standard output or to a file that is never readable by others, not even while
    it is written (it holds diffs of the engine files)."""
    text = json.dumps(report, indent=2) + "\n"
    if destination == Path("-"):
        sys.stdout.write(text)
        return
    target = destination.expanduser().absolute()
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as exc:
        errors.print(f"could not write the report to {destination}: {exc.strerror}")
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if target.is_symlink():
            # Checked before the run; one planted since is neither followed nor replaced.
            Path(tmp).unlink()
            errors.print(
                f"did not write the report to {destination}: it became a symbolic link during the run", markup=False
            )
            return
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        errors.print(f"could not write the report to {destination}: {exc.strerror}")


def check_inventory(inventory: Path) -> None:
    """Malformed inventory files are named here, before Ansible starts (which would not name them)."""
    problems = malformed_yaml(inventory)
    for problem in problems:
        errors.print(problem)
    if problems:
        errors.print("nothing was run: fix the inventory first")
        sys.exit(EXIT_FAILED)
