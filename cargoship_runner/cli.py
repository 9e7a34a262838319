"""The ``cargoship`` command line."""

from __future__ import annotations

import difflib
import json
import os
import sys
from pathlib import Path

import click

from cargoship_runner import __version__
from cargoship_runner.collection import (
    CollectionNotFound,
    concurrency_pattern,
    phase_hook_points,
    phases,
    plan_module,
    report_module,
)
from cargoship_runner.exit_policy import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_UNREACHABLE, EXIT_USAGE
from cargoship_runner.operation import (
    CommandLine,
    check_inventory,
    check_report_path,
    execute,
    parse_extra_vars,
    usage_error,
)
from cargoship_runner.output import console, errors, styled
from cargoship_runner.runner import DEFAULT_FORKS, RunOptions, run_playbook


def concurrency(value: str) -> str:
    if not concurrency_pattern().match(value):
        raise click.BadParameter(f"{value!r} is neither a count (e.g. 2) nor a percentage (e.g. 25%)")
    return value


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cargoship", message="%(prog)s %(version)s")
def main() -> None:
    """Change the engine configuration of a k3s or RKE2 fleet without an outage.

    cargoship shows exactly what it would do before it touches anything (--dry-run),
    then does it one safe phase at a time.

    \b
    Examples:
      cargoship engine-config-sync -i inventory/ --dry-run --diff
      cargoship engine-config-sync -i inventory/ --confirm
      cargoship phase list
      cargoship phase run sync_worker -i inventory/ --dry-run
      cargoship unlock -i inventory/ --limit worker-03
    Shell completion (bash; zsh and fish alike):
      eval "$(_CARGOSHIP_COMPLETE=bash_source cargoship)"
    """


RUN_OPTIONS = [
    click.option(
        "-i",
        "--inventory",
        required=True,
        multiple=True,
        type=click.Path(exists=True, dir_okay=True, path_type=Path),
        help="Inventory: hosts and the desired engine configuration (repeatable, as for ansible-playbook).",
    ),
    click.option(
        "--dry-run",
        "--check",
        "dry_run",
        is_flag=True,
        help="Connect and assess against the live hosts; change nothing (--check: Ansible's name for it).",
    ),
    click.option("--confirm", is_flag=True, help="Do the real run without asking."),
    click.option(
        "-f",
        "--forks",
        "--concurrency",
        "concurrency",
        type=click.IntRange(1, 500),
        help=f"Hosts worked on in parallel (ansible-playbook -f). Default: forks of your ansible.cfg, else {DEFAULT_FORKS}.",
    ),
    click.option(
        "-w",
        "--work-concurrency",
        type=concurrency,
        default=None,
        help="Workers restarted at once: a count or a percentage. Default: cargoship_work_concurrency of the "
        "inventory, else 1.",
    ),
    click.option("-l", "--limit", help="Only these hosts (an Ansible host pattern, as ansible-playbook -l)."),
    click.option(
        "-K",
        "--ask-become-pass",
        is_flag=True,
        help="Ask for the sudo (become) password on the terminal, as ansible-playbook -K does.",
    ),
    click.option("--ask-vault-pass", is_flag=True, help="Ask for the vault password on the terminal."),
    click.option(
        "--vault-password-file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="For inventories with Ansible Vault secrets.",
    ),
    click.option(
        "--vault-id",
        "vault_ids",
        multiple=True,
        metavar="[LABEL@]SOURCE",
        help="A vault identity, as ansible-playbook --vault-id takes it (repeatable).",
    ),
    click.option(
        "--diff",
        "show_diff",
        is_flag=True,
        help="Also print each host's file changes as unified diffs (credentials masked).",
    ),
    click.option(
        "--output",
        type=click.Choice(["auto", "table", "plain"]),
        default="auto",
        show_default=True,
        help="The report as a table or as plain lines; auto: a table on a terminal, plain lines elsewhere "
        "(CI logs), so that no line is folded.",
    ),
    click.option(
        "--report-json",
        type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
        help="Also write the report as JSON to this file (mode 0600), or to standard output with '-' "
        "(the table and progress then go to standard error).",
    ),
    click.option(
        "--keep-artifacts",
        is_flag=True,
        help="Keep ansible-runner's directory of the run (mode 0700) and print its path. It keeps the events "
        "and the output of ansible-playbook, credentials masked as Ansible masks them (no_log), and the "
        "report; never the environment, the extra vars or the passwords.",
    ),
    click.option(
        "-e",
        "--extra-vars",
        "extra_vars",
        multiple=True,
        metavar="KEY=VALUE|YAML|@FILE",
        help="Variables for the run, as ansible-playbook -e takes them (repeatable), e.g. "
        "-e cargoship_controllers_group=server. Secrets belong in a (vaulted) file given as -e @FILE: "
        "ansible-playbook reads it by its path and the command never copies it.",
    ),
    click.option("--detailed-exitcode", is_flag=True, help="With --dry-run, exit 2 when there is work to do."),
    click.option(
        "-v",
        "--verbose",
        count=True,
        help="Show Ansible's own output (credentials masked) instead of the progress lines; -vv... for more.",
    ),
]


def command_line(run: dict) -> CommandLine:
    """The run options click parsed (RUN_OPTIONS, every one of them: CommandLine takes each by name)."""
    return CommandLine(**run)  # pylint: disable=missing-kwoa


def run_options(command):
    for option in reversed(RUN_OPTIONS):
        command = option(command)
    return command


@main.command("engine-config-sync")
@run_options
@click.option(
    "--kubeconfig/--no-kubeconfig",
    "update_kubeconfig",
    default=None,
    help="Write the cluster's admin kubeconfig into the local kubeconfig (default: cargoship_kubeconfig_update of "
    "the inventory, else no).",
)
@click.option(
    "--label-nodes",
    is_flag=True,
    default=None,
    help="Label each node node-role.kubernetes.io/<profile>=true (default: cargoship_label_nodes of the inventory).",
)
@click.option(
    "--plan-out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --dry-run: write the plan (what each host was found like, what would be done) to this file "
    "(mode 0600) and print its digest, to apply it later with --plan.",
)
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Apply this reviewed plan exactly: refused, before anything is changed, if a host, file, node or the "
    "inventory is not what the plan was made from.",
)
@click.option(
    "--expect-digest",
    metavar="DIGEST",
    help="With --plan: the digest of the plan that was reviewed; any other plan file is refused.",
)
def engine_config_sync(update_kubeconfig, label_nodes, plan_out, plan_file, expect_digest, **run):
    """Bring the engine configuration of every host in line with the inventory.

    Exit codes: 0 done (or nothing to do), 1 failed, 2 work found (dry run with
    --detailed-exitcode), 3 unreachable host, 4 a host is locked by another run, 64 bad usage,
    130 interrupted (Ctrl-C, SIGTERM or SIGHUP: the nodes started on are put back first).

    \b
    Examples:
      cargoship engine-config-sync -i inventory/ --dry-run --diff
      cargoship engine-config-sync -i inventory/ --dry-run --detailed-exitcode --report-json plan.json
      cargoship engine-config-sync -i inventory/ --confirm -w 25% --vault-id prod@prompt
      cargoship engine-config-sync -i inventory/ --check -l 'worker-0*' -K
      cargoship engine-config-sync -i inventory/ --dry-run --plan-out prod.plan
      cargoship engine-config-sync -i inventory/ --plan prod.plan --expect-digest sha256:… --confirm
    """
    # Given only when asked for here: otherwise the inventory's own setting stands.
    switches = {"cargoship_kubeconfig_update": update_kubeconfig, "cargoship_label_nodes": label_nodes}
    asked = command_line(run)
    switches.update(plan_switches(asked, plan_out, plan_file, expect_digest))
    execute("engine-config-sync", {k: v for k, v in switches.items() if v is not None}, asked)


def plan_switches(asked, plan_out: Path | None, plan_file: Path | None, expect_digest: str | None) -> dict:
    """The reviewed plan's options as the playbook's variables, checked before anything runs: a plan file that
    was edited or is not the reviewed one is refused here, with no host contacted."""
    if plan_out is not None and not asked.dry_run:
        usage_error("--plan-out writes the plan of a dry run: add --dry-run")
    if plan_out is not None and plan_file is not None:
        usage_error("--plan-out and --plan contradict each other: make a plan with a dry run, then apply it")
    if expect_digest is not None and plan_file is None:
        usage_error("--expect-digest names the digest of the plan given with --plan")
    if plan_out is not None:
        check_report_path(plan_out, "--plan-out")
        return {"cargoship_plan_out": str(plan_out.expanduser().absolute())}
    if plan_file is None:
        return {}
    plans = plan_module()
    try:
        _plan, digest = plans.load(str(plan_file), expect_digest)
    except plans.PlanError as exc:
        errors.print(f"refused: {exc}")
        sys.exit(EXIT_FAILED)
    console.print(styled("applying the reviewed plan ", (str(plan_file), "bold"), f" ({digest})"), soft_wrap=True)
    return {"cargoship_plan_file": str(plan_file.expanduser().absolute()), "cargoship_plan_digest": digest}


@main.group()
def phase() -> None:
    """List the phases, or run one phase alone.

    \b
    Examples:
      cargoship phase list
      cargoship phase run host_facts -i inventory/
    """


@phase.command("list")
@click.option("--json", "as_json", is_flag=True, help="As JSON, for scripts.")
def phase_list(as_json):
    """Every phase of every operation, in order, with its dry-run behaviour and hook points.

    \b
    Examples:
      cargoship phase list
      cargoship phase list --json | jq -r '.[].name'
    """
    declared = phases()
    if as_json:
        click.echo(json.dumps([{**p, "hook_points": phase_hook_points(p)} for p in declared], indent=2))
        return
    for operation in dict.fromkeys(p["operation"] for p in declared):
        console.print(styled((operation, "bold")))
        for p in (p for p in declared if p["operation"] == operation):
            console.print(styled(f"  {p['order']:>2}. ", (p["name"], "cyan"), f" — {p['title']}"))
            console.print(f"      {p['description']}", soft_wrap=True)
            console.print(f"      dry run: {p['dry_run_label']}" + (f" ({p['assessment']})" if p["assessment"] else ""))
            around = " (around each node's own restart)" if p["per_node"] else ""
            console.print(f"      hooks{around}: {', '.join(phase_hook_points(p))}", soft_wrap=True)
        console.print(
            styled(
                "  and the stage ", ("cluster_ready", "cyan"), ": once, after the sync, when every node is Ready again"
            )
        )


def complete_phase(ctx, param, incomplete: str):
    """Shell completion of phase names."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(p["name"], help=p["title"]) for p in phases() if p["name"].startswith(incomplete)]


def read_only(name: str) -> bool:
    return any(p["name"] == name and p["dry_run_label"] == "runs, reads only" for p in phases())


@phase.command("run")
@click.argument("name", shell_complete=complete_phase)
@run_options
@click.option(
    "--force",
    is_flag=True,
    help="Redo the work even where there is nothing to do (e.g. restart a node whose config matches).",
)
@click.option(
    "--keep-existing", is_flag=True, help="kubeconfig: keep an existing entry of the same name instead of replacing it."
)
def phase_run(name, force, keep_existing, **run):
    """Run phase NAME alone, with the read-only phases it needs and, if it changes hosts, the lock around it.

    A read-only phase (host_facts, detect_os...) runs without --confirm.

    \b
    Examples:
      cargoship phase run host_facts -i inventory/
      cargoship phase run sync_worker -i inventory/ --dry-run --diff
      cargoship phase run sync_worker -i inventory/ --confirm --limit 'worker-0*'
      cargoship phase run kubeconfig -i inventory/ --confirm --keep-existing
    """
    known = [p["name"] for p in phases()]
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        errors.print(
            f"unknown phase {name!r}"
            + (f" (did you mean {close[0]}?)" if close else "")
            + f"; the phases are: {', '.join(known)} (see `cargoship phase list`)"
        )
        sys.exit(EXIT_USAGE)
    # A phase asked for by name runs (kubeconfig and label_nodes included: their roles see cargoship_phase).
    # --force and --keep-existing are sent only when given: otherwise the inventory's own settings stand.
    extravars = {"cargoship_phase": name}
    extravars.update({"cargoship_force": True} if force else {})
    extravars.update({"cargoship_kubeconfig_keep": True} if keep_existing else {})
    execute(f"phase {name}", extravars, command_line(run), changes_hosts=not read_only(name))


@main.command()
@click.option("-i", "--inventory", required=True, multiple=True, type=click.Path(exists=True, path_type=Path))
@click.option("-l", "--limit", help="Only these hosts.")
@click.option("--vault-password-file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--vault-id", "vault_ids", multiple=True, metavar="[LABEL@]SOURCE", help="As for a run.")
@click.option("-e", "--extra-vars", "extra_vars", multiple=True, metavar="KEY=VALUE|YAML|@FILE", help="As for a run.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask: break the locks.")
def unlock(inventory, limit, vault_password_file, vault_ids, extra_vars, yes):
    """Break the cargoship lock on the hosts, whoever holds it.

    A run that still holds a lock may be working on a node: break a lock only when you know its run is
    gone. It asks first, unless --yes.

    \b
    Examples:
      cargoship unlock -i inventory/ --limit worker-03
      cargoship unlock -i inventory/ --yes
    """
    if not yes:
        if not sys.stdin.isatty():
            errors.print("unlock breaks locks another run may still hold: pass --yes to confirm")
            sys.exit(EXIT_USAGE)
        if not click.confirm(
            f"Break the cargoship locks on {limit or 'every host'}, whoever holds them?", default=False
        ):
            sys.exit(EXIT_USAGE)
    for source in inventory:
        check_inventory(source)
    user_vars, user_var_files = parse_extra_vars(extra_vars)
    outcome = run_playbook(
        RunOptions(
            playbook="unlock",
            inventory=inventory,
            limit=limit,
            extravars={"cargoship_unlock_force": True},
            vault_password_file=vault_password_file,
            user_vars=user_vars,
            user_var_files=user_var_files,
            vault_ids=vault_ids,
        )
    )
    if outcome.rc != 0:
        errors.print(
            "unlock failed" + (f" (unreachable: {', '.join(outcome.unreachable)})" if outcome.unreachable else "")
        )
        for line in outcome.ansible_errors:
            errors.print(f"  {line}")
        if outcome.log:
            errors.print(f"Ansible's output of this run is kept in {outcome.log}")
        sys.exit(EXIT_UNREACHABLE if outcome.unreachable else EXIT_FAILED)
    console.print("locks released")


@main.command()
@click.option("-i", "--inventory", required=True, multiple=True, type=click.Path(exists=True, path_type=Path))
@click.option("--vault-password-file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--vault-id", "vault_ids", multiple=True, metavar="[LABEL@]SOURCE", help="As for a run.")
@click.option("-e", "--extra-vars", "extra_vars", multiple=True, metavar="KEY=VALUE|YAML|@FILE", help="As for a run.")
@click.option("--json", "as_json", is_flag=True, help="As JSON, for scripts.")
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 2 when not every node is proven to run the inventory's desired state.",
)
def status(inventory, vault_password_file, vault_ids, extra_vars, as_json, detailed_exitcode):
    """Show which configuration each node runs, from the Kubernetes API alone (no host is connected to).

    Nodes are grouped by the digest of the desired state a run proved them to run; each is proven, changed
    since proven (its engine started since with other files), not the desired state, unproven (no run has
    proven it) or not in the inventory. The API is reached with cargoship_api_kubeconfig (and
    cargoship_api_context) from the inventory, else K8S_AUTH_KUBECONFIG, KUBECONFIG or ~/.kube/config.

    \b
    Examples:
      cargoship status -i inventory/
      cargoship status -i inventory/ --json | jq '.nodes | map_values(.status)'
    """
    for source in inventory:
        check_inventory(source)
    user_vars, user_var_files = parse_extra_vars(extra_vars)
    found: dict = {}

    def collect(event: dict) -> bool:
        data = event.get("event_data") or {}
        result = data.get("res") or {}
        if event.get("event") == "runner_on_ok" and isinstance(result.get("fleet"), dict):
            found.update(result)
        return True

    outcome = run_playbook(
        RunOptions(
            playbook="status",
            inventory=inventory,
            vault_password_file=vault_password_file,
            user_vars=user_vars,
            user_var_files=user_var_files,
            vault_ids=vault_ids,
        ),
        collect,
    )
    if outcome.rc != 0 or not found:
        # The input's problems as a run names them: with their hosts and where each value was read.
        reported = [line.removeprefix("error: ") for line in report_module().error_lines(outcome.report or {})]
        errors.print("the fleet map could not be made")
        for line in reported or outcome.ansible_errors:
            errors.print(f"  {line}")
        if outcome.log:
            errors.print(f"Ansible's output of this run is kept in {outcome.log}")
        sys.exit(EXIT_FAILED)
    if as_json:
        print(json.dumps(found["fleet"], indent=2, sort_keys=True))
    else:
        for line in found["lines"]:
            console.print(styled(line))  # text as it is: host and node names are never markup
    if detailed_exitcode and not found["fleet"]["converged"]:
        sys.exit(2)


def run() -> None:
    """Entry point: usage errors exit 64, so that exit 2 always means "a dry run found work"."""
    # Whatever the command and the Ansible it starts write on this machine (reports, kubeconfigs, run
    # directories, logs) is for the operator alone, from the moment it is created.
    os.umask(0o077)
    try:
        main(standalone_mode=False)
    except click.exceptions.Abort:
        errors.print("aborted")
        sys.exit(EXIT_INTERRUPTED)
    except click.UsageError as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_FAILED)
    except CollectionNotFound as exc:
        errors.print(f"cargoship: {exc}")
        sys.exit(EXIT_FAILED)
