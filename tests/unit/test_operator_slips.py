"""The mistakes every operator makes, answered before any host is touched: text that looks like markup,
bad values, misspelt or missing variables, contradictory options, a report that could not be written,
and a desired state that was not loaded at all (which must never mean "remove")."""

from __future__ import annotations

import io
import json
import stat
import subprocess
import time
from pathlib import Path

import helpers
import pytest
import yaml
from click.testing import CliRunner
from test_cli_habits import Recorder
from test_modules import run_module

from ansible_collections.cargoship.engine.plugins.action import validate_input
from ansible_collections.cargoship.engine.plugins.module_utils import _desired_state as ds
from cargoship_runner import cli, operation, output, render
from cargoship_runner.progress import Progress
from cargoship_runner.runner import GuardedHandler

REPO = Path(__file__).resolve().parents[2]
MARKUP_LIKE = ["[/path]", "[red]", "[k3s, rke2]", "[bold]x[/bold]", "[/x]", "begin:end:step", ":thumbs_up:"]


@pytest.fixture
def screen(monkeypatch):
    """What the command's own consoles print (their settings unchanged)."""
    out, err = io.StringIO(), io.StringIO()
    # rich keeps no file of its own until one is set (it writes to the sys.stdout/stderr of the moment):
    # set and restore that, not the property, which would pin the consoles to this test's streams.
    monkeypatch.setattr(output.console, "_file", out)
    monkeypatch.setattr(output.errors, "_file", err)
    return lambda: out.getvalue() + err.getvalue()


def test_progress_prints_markup_like_text_verbatim(screen):
    progress = Progress()
    for text in MARKUP_LIKE:
        progress(
            {
                "event": "runner_on_failed",
                "event_data": {
                    "host": f"h{text}",
                    "task": f"t{text}",
                    "role": "cargoship.engine.connect",
                    "res": {"msg": f"endpoint {text} refused"},
                },
            }
        )
    shown = screen()
    for text in MARKUP_LIKE:
        assert f"t{text} failed on h{text}: endpoint {text} refused" in shown


def test_plain_lines_print_verbatim_with_no_markup_or_emoji_codes(screen):
    """Lines the command prints as they come (Ansible's error lines, paths, host names): rich would read
    ``[red]`` as a style and ``:end:`` as an emoji (Ansible's "begin:end:step" came out as "begin🔚step")."""
    for text in MARKUP_LIKE:
        output.errors.print(f"  error {text}")
        output.console.print(f"line {text}")
    shown = screen()
    for text in MARKUP_LIKE:
        assert f"  error {text}\n" in shown and f"line {text}\n" in shown


@pytest.mark.parametrize("output_kind", ["table", "plain"])
def test_the_report_prints_markup_like_cells_verbatim(screen, output_kind):
    report = {
        "schema_version": 1,
        "operation": "engine-config-sync",
        "dry_run": True,
        "work_found": True,
        "phases": [
            {
                "name": "sync_worker",
                "title": "Sync workers",
                "dry_run_label": "reported, not run",
                "status": "would run",
                "hosts": {
                    f"w{i}": {"status": "would run", "changes": [f"write {text}"]} for i, text in enumerate(MARKUP_LIKE)
                },
            }
        ],
    }
    render.render_report(report, output_kind)
    shown = " ".join(screen().split())  # a table may fold a long cell
    for text in MARKUP_LIKE:
        assert f"write {text}" in shown


def test_a_handler_that_raises_stops_the_run_instead_of_dying_and_keeps_tracking():
    seen = []

    def handler(event):
        seen.append(event["n"])
        if event["n"] == 1:
            raise ValueError("[/path] is not markup")

    guarded = GuardedHandler(handler)
    assert guarded({"n": 0}) is True and not guarded.failed
    assert guarded({"n": 1}) is True and guarded.failed
    assert guarded({"n": 2}) is True
    assert seen == [0, 1, 2] and guarded.error == "ValueError: [/path] is not markup"


def test_a_handler_failing_in_a_real_run_of_ansible_runner_ends_it_and_says_why(tmp_path):
    """Through ansible-runner itself: the handler raises on the first event; the run returns (it used to
    hang for ever) with the handler's error and a failed outcome."""
    import signal

    from cargoship_runner.runner import RunOptions, run_playbook

    inventory = bad_inventory(tmp_path, {})

    def handler(event):
        raise RuntimeError("[/x] printed as markup")

    def hung(signum, frame):
        raise AssertionError("the run hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        outcome = run_playbook(RunOptions(playbook="engine_config_sync", inventory=inventory, dry_run=True), handler)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert outcome.handler_error == "RuntimeError: [/x] printed as markup"
    assert outcome.rc != 0 and outcome.stopped_early


def bad_inventory(tmp_path: Path, group_vars: dict, hosts: dict | None = None) -> Path:
    """Hosts that cannot be reached at all (a closed port on this machine): input errors must never get
    as far as trying them."""
    # A kubeconfig of a server on a closed port too: the connection can be set up, never made.
    (tmp_path / "kubeconfig").write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "k", "user": {"token": "t"}}],
                "contexts": [{"name": "k", "context": {"cluster": "k", "user": "k"}}],
                "current-context": "k",
            }
        )
    )
    inventory = {
        "all": {
            "vars": {
                "cargoship_engine": "k3s",
                "ansible_host": "127.0.0.1",
                "ansible_port": 9,
                "cargoship_api_kubeconfig": str(tmp_path / "kubeconfig"),
            },
            "children": hosts
            or {"controllers": {"hosts": {"c1": None}}, "workers": {"hosts": {"w1": None, "w2": None}}},
        }
    }
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
    return tmp_path / "hosts.yml"


def cargoship(*args: str) -> subprocess.CompletedProcess:
    """The command as the lab tests run it, with less time: nothing here reaches a host."""
    return helpers.cargoship(*args, timeout=60)


def test_an_invalid_endpoint_through_the_command_exits_1_in_seconds_naming_every_error(tmp_path):
    inventory = bad_inventory(
        tmp_path,
        {
            "cargoship_registries": {
                "mirrors": {"docker.io": {"endpoint": ["ftp://x", "[/path]"]}, "registry.k8s.io": None}
            },
            "cargoship_registires": {},
            "cargoship_audit_policy": {
                "apiVersion": "audit.k8s.io/v1",
                "kind": "Policy",
                "rules": [{"level": "Everything"}],
            },
            "cargoship_work_concurrency": "[k3s, rke2]",
        },
    )
    started = time.monotonic()
    result = cargoship(
        "engine-config-sync", "-i", str(inventory), "--dry-run", "--report-json", str(tmp_path / "r.json")
    )
    assert time.monotonic() - started < 30
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown  # never 3 (unreachable): no host was tried
    assert "unreachable" not in shown and "Traceback" not in shown and "_AnsibleTagged" not in shown
    assert 'cargoship_registries.mirrors["docker.io"].endpoint[0]: not an endpoint' in shown and "'ftp://x'" in shown
    assert "'[/path]'" in shown and "'[k3s, rke2]'" in shown
    assert "cargoship_registires: unknown variable (did you mean cargoship_registries?)" in shown
    assert "'Everything' is not one of None, Metadata, Request, RequestResponse" in shown
    assert f"{tmp_path}/group_vars/all.yml:" in shown  # where the value was read
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["run_id"] and report["version"] and len(report["errors"]) == 5
    assert all(e["hosts"] == ["c1", "w1", "w2"] for e in report["errors"])


def test_a_variable_whose_template_fails_is_named_and_the_others_are_still_checked(tmp_path):
    """A value templated from another variable that does not fit (the example's chart values picked by
    the engine's name) is named with Ansible's reason, beside the others' errors; a value given with -e
    is said to come from the command line, not from the file the command hands it to Ansible in."""
    inventory = bad_inventory(
        tmp_path,
        {
            "values_by_engine": {"k3s": {"traefik": {"values": {}}}},
            "cargoship_chart_values": "{{ values_by_engine[cargoship_engine] }}",
            "cargoship_drain_timeout": "{{ no_such_variable }}",
            "cargoship_audit_policy": {"kind": "Policy"},
        },
    )
    result = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run", "-e", "cargoship_engine=k8s")
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown
    assert "Traceback" not in shown and "unreachable" not in shown
    assert "cargoship_chart_values: its value cannot be read: object of type 'dict' has no attribute 'k8s'" in shown
    assert "cargoship_drain_timeout: its value cannot be read: 'no_such_variable' is undefined" in shown
    assert "cargoship_engine: must be one of k3s, rke2, got 'k8s' (c1, w1, w2; the command line's -e)" in shown
    assert "cargoship_audit_policy: must be a Policy" in shown and f"{tmp_path}/group_vars/all.yml:" in shown
    assert "extra-vars.json" not in shown


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"cargoship_api_kubeconfig": "/nonexistent/kubeconfig"},
            "cargoship_api_kubeconfig: the Kubernetes API cannot be reached with the kubeconfig /nonexistent/kubeconfig: "
            "no kubeconfig file at /nonexistent/kubeconfig (c1, w1, w2)",
        ),
        (
            {"cargoship_api_context": "prod-east"},
            "cargoship_api_context: the Kubernetes API cannot be reached with the kubeconfig {kubeconfig}, context "
            "prod-east: the kubeconfig has no context named 'prod-east' (c1, w1, w2)",
        ),
    ],
    ids=["missing-kubeconfig", "unknown-context"],
)
def test_an_api_connection_that_cannot_be_set_up_is_an_input_error(tmp_path, given, message):
    """The kubeconfig is the control host's own file: a missing one, or a context it does not have, is known
    before any host is contacted (it used to surface after every host was locked, in engine_facts)."""
    inventory = bad_inventory(tmp_path, given)
    result = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run")
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown
    assert message.format(kubeconfig=tmp_path / "kubeconfig") in shown
    assert "unreachable" not in shown and "Traceback" not in shown


def test_no_host_in_the_groups_still_writes_the_report(tmp_path):
    inventory = bad_inventory(tmp_path, {}, hosts={"servers": {"hosts": {"s1": None}}})
    result = cargoship(
        "engine-config-sync", "-i", str(inventory), "--dry-run", "--report-json", str(tmp_path / "r.json")
    )
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert "no host to work on" in report["errors"][0]["message"]


# Refused before any host is reached: the hosts here are a closed port (a run that tried one would end
# unreachable, exit 3), so these need no lab.
@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("empty", "no host to work on: the inventory has no hosts"),
        ("no-groups", "no inventory host is in the controllers group 'controllers' or workers group 'workers'"),
        ("limit-outside", "no host to work on: the hosts selected (bastion) include no host of the"),
        ("limit-nothing", "before producing a report"),
    ],
)
def test_an_inventory_that_selects_no_node_is_an_error(tmp_path, layout, message):
    unreachable = {"cargoship_engine": "k3s", "ansible_host": "127.0.0.1", "ansible_port": 9}
    hosts = {"c1": None}
    inventory = {
        "empty": {"all": {"hosts": {}}},
        "no-groups": {"all": {"hosts": hosts, "vars": unreachable}},
        "limit-nothing": {"all": {"vars": unreachable, "children": {"controllers": {"hosts": hosts}}}},
        "limit-outside": {
            "all": {
                "vars": unreachable,
                "children": {"controllers": {"hosts": hosts}, "bastions": {"hosts": {"bastion": None}}},
            }
        },
    }[layout]
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    limit = {"limit-outside": ["--limit", "bastion"], "limit-nothing": ["--limit", "no-such-host"]}.get(layout, [])
    result = cargoship("engine-config-sync", "-i", str(path), "--dry-run", "--detailed-exitcode", *limit)
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stdout + result.stderr


def test_an_unknown_phase_is_refused_with_the_list(tmp_path):
    inventory = bad_inventory(tmp_path, {})
    result = cargoship("phase", "run", "sync_wroker", "-i", str(inventory), "--dry-run")
    assert result.returncode == 64
    assert (
        "unknown phase 'sync_wroker' (did you mean sync_worker?); the phases are: connect, detect_os" in result.stderr
    )


def test_every_problem_of_the_desired_state_is_found_at_once():
    problems = ds.problems_of(
        {
            "engine": "k3s",
            "registries": {"mirrors": {"docker.io": {"endpont": []}, "quay.io": {"endpoint": ["ftp://q"]}}},
            "audit_policy": {
                "apiVersion": "audit.k8s.io/v1",
                "kind": "Policy",
                "omitStages": ["RequestRecieved"],
                "rules": [{"level": "Metadata", "omitStages": ["Panic"]}, {"level": "everything"}, {}],
            },
            "pod_security": {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [
                    {
                        "name": "PodSecurity",
                        "configuration": {
                            "defaults": {
                                "enforce": "strictest",
                                "warn-version": "latest",
                                "audit-version": "1.30",
                                "enfroce": "baseline",
                            },
                            "exemptions": {"namespaces": ["kube-system"], "users": []},
                        },
                    }
                ],
            },
            "chart_values": {"traefik": "remove"},
        }
    )
    messages = [found[0] for found in problems.found]
    expected = [
        "endpont: unknown key (did you mean 'endpoint'?)",
        "'ftp://q'",
        "omitStages[0]: 'RequestRecieved' is not one of RequestReceived",
        "rules[1].level: 'everything' is not one of None, Metadata, Request, RequestResponse",
        "rules[2].level: required",
        "defaults.enforce: 'strictest' is not one of privileged, baseline, restricted",
        "defaults.audit-version: expected latest or v1.<minor>, got '1.30'",
        "defaults.enfroce: unknown key (did you mean 'enforce'?)",
        "exemptions.users: unknown key",
        "cargoship_chart_values.traefik: expected a mapping (namespace, values), or absent, got a string",
    ]
    for text in expected:
        assert any(text in m for m in messages), (text, messages)
    assert len(messages) == len(expected)
    assert not any("Tagged" in m or "NoneType" in m for m in messages)


def test_the_embedded_registry_form_and_absent_are_accepted():
    state = ds.validate({"engine": "k3s", "registries": {"mirrors": {"registry.k8s.io": None, "docker.io": None}}})
    rendered = ds.render(state, "agent", False)[0]
    assert yaml.safe_load(rendered["content"]) == {"mirrors": {"registry.k8s.io": None, "docker.io": None}}
    assert (
        ds.render(ds.validate({"engine": "k3s", "registries": "absent", "audit_policy": "absent"}), "server", True)
        == []
    )
    with pytest.raises(ds.InputError, match="or absent to remove what cargoship wrote, got 'none'"):
        ds.validate({"engine": "k3s", "registries": "none"})


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("cargship_registries", "cargship_registries: unknown variable (did you mean cargoship_registries?)"),
        (
            "registries",
            "registries: not a cargoship variable, and cargoship ignores it (did you mean cargoship_registries?)",
        ),
        ("cargoship_pod_securty", "did you mean cargoship_pod_security?"),
        ("ingress_chart_values", None),
        ("engine", None),
        ("ansible_host", None),
    ],
)
def test_near_misses_of_known_names_are_errors(name, problem):
    found = validate_input.name_problem(name)
    assert (found is None) if problem is None else (problem in found)


def test_a_kind_given_as_null_is_an_error_and_one_not_given_is_not():
    phases = validate_input.load_phases()
    null = validate_input.host_problems({"cargoship_engine": "k3s", "cargoship_registries": None}, phases)
    assert [found[0] for found in null] == [
        "cargoship_registries: empty (null); give its value, or absent to remove what cargoship wrote of it "
        "(a kind the inventory does not name at all is left as the hosts have it)"
    ]
    assert validate_input.host_problems({"cargoship_engine": "k3s"}, phases) == []


def layout_of(root: Path) -> dict:
    return {
        "config_file": str(root / "etc" / "config.yaml"),
        "data_dir": str(root / "data"),
        "private_registry": str(root / "etc" / "registries.yaml"),
    }


POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}
PSA = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration", "plugins": []}


def test_a_kind_the_state_does_not_name_is_kept_and_noted_and_absent_removes_it(tmp_path):
    layout = layout_of(tmp_path)
    common = {"engine": "k3s", "node_role": "server", "layout": layout, "with_charts": True}
    full = {
        **common,
        "registries": {"mirrors": {"docker.io": {"endpoint": ["https://m.example"]}}},
        "audit_policy": POLICY,
        "pod_security": PSA,
        "chart_values": {"traefik": {"values": {"replicas": 2}}},
        "backup_id": "run1",
        "backup_root": str(tmp_path / "backups"),
    }
    written = run_module("engine_config", full)
    assert written["changed"] and len(written["changes"]) == 5, written
    before = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file() and "backups" not in p.parts}

    nothing = run_module("engine_config", common, check_mode=True)
    assert nothing["changed"] is False and nothing["changes"] == [], nothing
    assert nothing["kept"] == [
        f"registries: not in this inventory; {layout['private_registry']} written by cargoship is kept "
        "(set cargoship_registries: absent to remove it)",
        f"audit policy: not in this inventory; {tmp_path}/data/server/cargoship-audit-policy.yaml written by "
        "cargoship is kept (set cargoship_audit_policy: absent to remove it)",
        f"pod security: not in this inventory; {tmp_path}/data/server/cargoship-pod-security.yaml written by "
        "cargoship is kept (set cargoship_pod_security: absent to remove it)",
        f"chart values: not in this inventory; {tmp_path}/data/server/manifests/cargoship-traefik.yaml written by "
        "cargoship is kept (set cargoship_chart_values: absent to remove it)",
    ]

    # Only the audit policy asked away: its file and arguments go, the pod-security argument stays.
    audit_gone = run_module(
        "engine_config",
        {**common, "audit_policy": "absent", "backup_id": "run2", "backup_root": str(tmp_path / "backups")},
    )
    assert {(c["kind"], c["action"]) for c in audit_gone["changes"]} == {
        ("audit_policy", "remove"),
        ("config", "update"),
    }
    dropin = yaml.safe_load((tmp_path / "etc" / "config.yaml.d" / "90-cargoship.yaml").read_text())
    assert dropin == {
        "kube-apiserver-arg+": [f"admission-control-config-file={tmp_path}/data/server/cargoship-pod-security.yaml"]
    }
    after = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file() and "backups" not in p.parts}
    assert {p for p in before if p not in after} == {tmp_path / "data" / "server" / "cargoship-audit-policy.yaml"}
    assert all(after[p] == before[p] for p in after if p.name != "90-cargoship.yaml")


@pytest.fixture
def recorder(monkeypatch, tmp_path):
    recorder = Recorder()
    monkeypatch.setattr(operation, "run_playbook", recorder)
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    recorder.inventory = str(tmp_path / "hosts.yml")
    return recorder


def test_the_inventorys_work_concurrency_stands_unless_the_option_is_given(recorder):
    assert CliRunner().invoke(cli.main, ["engine-config-sync", "-i", recorder.inventory, "--dry-run"]).exit_code == 0
    assert "cargoship_work_concurrency" not in recorder.calls[-1].extravars
    CliRunner().invoke(cli.main, ["engine-config-sync", "-i", recorder.inventory, "--dry-run", "-w", "25%"])
    assert recorder.calls[-1].extravars["cargoship_work_concurrency"] == "25%"


def test_phase_run_switches_are_sent_only_when_given(recorder):
    CliRunner().invoke(cli.main, ["phase", "run", "host_facts", "-i", recorder.inventory])
    assert recorder.calls[-1].extravars == {"cargoship_phase": "host_facts"}
    CliRunner().invoke(cli.main, ["phase", "run", "host_facts", "-i", recorder.inventory, "--force", "--keep-existing"])
    extravars = recorder.calls[-1].extravars
    assert extravars["cargoship_force"] is True and extravars["cargoship_kubeconfig_keep"] is True


def test_ansible_spellings_work_and_mean_what_they_mean_in_ansible(recorder):
    result = CliRunner().invoke(
        cli.main, ["engine-config-sync", "-i", recorder.inventory, "--check", "-l", "w*", "-f", "7"]
    )
    assert result.exit_code == 0, result.output
    options = recorder.calls[-1]
    assert (options.dry_run, options.limit, options.forks) == (True, "w*", 7)
    # -c is ansible-playbook's --connection: never something else here.
    assert CliRunner().invoke(cli.main, ["engine-config-sync", "-i", recorder.inventory, "-c", "5"]).exit_code != 0


def test_contradictions_and_unwritable_reports_are_refused_before_the_run(recorder, tmp_path, screen):
    def refused(*args: str) -> str:
        result = CliRunner().invoke(cli.main, ["engine-config-sync", "-i", recorder.inventory, *args])
        assert result.exit_code == 64, args
        return screen()

    assert "--dry-run and --confirm contradict each other" in refused("--dry-run", "--confirm")
    assert "no such directory" in refused("--dry-run", "--report-json", str(tmp_path / "no" / "r.json"))
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere.json")
    assert "is a symbolic link" in refused("--dry-run", "--report-json", str(tmp_path / "link.json"))
    assert "ask on a terminal and there is none" in refused("--dry-run", "-K")
    assert recorder.calls == []  # nothing ran


def test_secret_paths_are_checked_each_with_its_index():
    phases = validate_input.load_phases()
    given = {"cargoship_engine": "k3s", "cargoship_secret_paths": ["traefik.dashboard.note", ["app", "tls.key"]]}
    assert validate_input.host_problems(given, phases) == []
    wrong = {"cargoship_engine": "k3s", "cargoship_secret_paths": ["traefik", "a..b", {"k": 1}, ["app", ""]]}
    assert [found[0] for found in validate_input.host_problems(wrong, phases)] == [
        "cargoship_secret_paths[0]: 'traefik' names a chart but no key inside its values (chart.key)",
        "cargoship_secret_paths[1]: expected a text like chart.key.key or a list of keys, got 'a..b'",
        "cargoship_secret_paths[2]: expected a text like chart.key.key or a list of keys, got {'k': 1}",
        "cargoship_secret_paths[3]: expected a text like chart.key.key or a list of keys, got ['app', '']",
    ]
    one = {"cargoship_engine": "k3s", "cargoship_secret_paths": "traefik.note"}
    assert [found[0] for found in validate_input.host_problems(one, phases)] == [
        "cargoship_secret_paths: expected a list of paths (chart.key.key, or a list of keys), got a string"
    ]


def test_kept_artifacts_hold_no_environment_extra_vars_or_passwords_and_the_vars_still_reach_ansible(
    tmp_path, monkeypatch
):
    """Through ansible-runner itself, with --keep-artifacts: it would dump the environment into
    artifacts/*/command and the extra vars and passwords under env/."""
    from cargoship_runner.runner import RunOptions, run_playbook

    monkeypatch.setenv("K8S_AUTH_API_KEY", "api-key-ENVMARK")
    (tmp_path / "inv").mkdir()
    inventory = bad_inventory(tmp_path / "inv", {})
    options = RunOptions(
        playbook="engine_config_sync",
        inventory=inventory,
        dry_run=True,
        keep_artifacts=True,
        # Read by Ansible (its unknown phase is the error below), and a value that must stay private.
        user_vars={"cargoship_phase": "no_such_phase", "site_note": "note-EXTRAMARK"},
        passwords={"become": "become-PASSMARK"},
    )
    from cargoship_runner import runner

    seen = []
    dump = runner.drop_command_dump

    def watched(status, runner_config):
        seen.append(runner_config.pexpect_timeout)
        dump(status, runner_config)

    monkeypatch.setattr(runner, "drop_command_dump", watched)
    outcome = run_playbook(options)
    try:
        # Its own settings still reach ansible-runner without env files: Ctrl-C is looked at every 0.25 s.
        assert seen and set(seen) == {0.25}
        assert outcome.rc != 0 and outcome.artifacts is not None
        kept = {p: p.read_text(errors="replace") for p in outcome.artifacts.rglob("*") if p.is_file()}
        assert any("unknown phase 'no_such_phase'" in text for text in kept.values()), "the extra vars were read"
        leaks = {str(p): m for p, text in kept.items() for m in ("ENVMARK", "EXTRAMARK", "PASSMARK") if m in text}
        assert leaks == {}
        assert not list(outcome.artifacts.glob("artifacts/*/command"))
        assert [p.name for p in outcome.artifacts.glob("env/*")] == ["settings"], "only the runner's own settings"
        assert not (outcome.artifacts / "extra-vars.json").exists()
    finally:
        subprocess.run(["rm", "-rf", str(outcome.artifacts)], check=False)


def test_local_outputs_never_follow_a_planted_link(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from cargoship_runner import runner

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    # The report: a link planted at its path during the run is neither followed nor replaced.
    planted = tmp_path / "report.json"
    planted.symlink_to(victim)
    with pytest.raises(SystemExit):
        operation.check_report_path(planted)
    operation.write_report({"phases": []}, planted)
    assert victim.read_text() == "precious\n" and planted.is_symlink()
    # The log of a failed run: not into a linked directory, not through a link at the log's name.
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "stdout").write_text("ansible output\n")
    run = runner.masked_stdout(SimpleNamespace(config=SimpleNamespace(artifact_dir=str(artifacts))))
    state = tmp_path / "state"
    (state / "cargoship").mkdir(parents=True)
    (state / "cargoship" / "logs").symlink_to(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    assert runner.keep_log(run, "RUN", "engine_config_sync") is None
    (state / "cargoship" / "logs").unlink()
    (state / "cargoship" / "logs").mkdir(mode=0o700)
    (state / "cargoship" / "logs" / "RUN-engine_config_sync.log").symlink_to(victim)
    assert runner.keep_log(run, "RUN", "engine_config_sync") is None
    assert victim.read_text() == "precious\n"
    kept = runner.keep_log(run, "RUN2", "engine_config_sync")
    assert kept.read_text() == "ansible output\n" and stat.S_IMODE(kept.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (
            {"cargoship_lock_stale_after": 1},
            "cargoship_lock_stale_after: the lock's stale window (1 s) must be at least",
        ),
        ({"cargoship_lock_stale_after": 0}, "cargoship_lock_stale_after: the lock's stale window (0 s)"),
        (
            {"cargoship_lock_stale_after": 10, "cargoship_lock_touch_interval": 0},
            "cargoship_lock_touch_interval: the lock's touch interval must be 1 s or more",
        ),
        ({"cargoship_lock_stale_after": 10, "cargoship_lock_touch_interval": 5}, None),
        ({}, None),
    ],
)
def test_the_locks_stale_window_is_checked_against_its_touch_interval(given, problem):
    found = [
        item[0]
        for item in validate_input.host_problems({"cargoship_engine": "k3s", **given}, validate_input.load_phases())
    ]
    assert (found == []) if problem is None else (len(found) == 1 and found[0].startswith(problem)), found


def test_the_command_stops_a_run_whose_lock_keeper_died_and_not_one_whose_keeper_ended_with_it(tmp_path):
    import threading

    from cargoship_runner import runner

    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "30"])
    try:
        # No keeper yet, a live one: nothing to do.
        assert runner.keeper_died(tmp_path) is None
        (tmp_path / "keeper.pid").write_text(str(live.pid))
        assert runner.keeper_died(tmp_path) is None
        # Killed under the run: it still names itself, and is gone.
        (tmp_path / "keeper.pid").write_text(str(dead.pid))
        assert runner.keeper_died(tmp_path) == dead.pid
        run = threading.Thread(target=time.sleep, args=(10,), daemon=True)
        run.start()
        interrupted = threading.Event()
        runner.watch_keeper(run, tmp_path, interrupted)
        assert interrupted.is_set()
        assert f"the lock keeper of this run (pid {dead.pid}) is gone" in (tmp_path / "keeper-stop.txt").read_text()
    finally:
        live.kill()
        live.wait()


def test_a_whole_number_given_with_e_as_text_is_accepted_and_anything_else_named():
    phases = validate_input.load_phases()
    given = {
        "cargoship_engine": "k3s",
        "cargoship_drain_timeout": "10",
        "cargoship_lock_stale_after": "8",
        "cargoship_lock_touch_interval": "4",
    }
    assert validate_input.host_problems(given, phases) == []
    wrong = {"cargoship_engine": "k3s", "cargoship_drain_timeout": "10s", "cargoship_ready_timeout": -1}
    assert sorted(item[0] for item in validate_input.host_problems(wrong, phases)) == [
        "cargoship_drain_timeout: expected a whole number of seconds, got '10s'",
        "cargoship_ready_timeout: expected a whole number of seconds, got -1",
    ]
    short = {"cargoship_engine": "k3s", "cargoship_lock_stale_after": "5", "cargoship_lock_touch_interval": "4"}
    assert next(item[0] for item in validate_input.host_problems(short, phases)).startswith(
        "cargoship_lock_stale_after:"
    )


def test_a_wait_of_zero_seconds_is_refused_and_a_pause_or_settle_of_zero_is_not():
    """A run given cargoship_service_timeout=0 stopped a node's engine, gave up at once on the stop, then on the
    start that was to put it back, and left the node cordoned ("engine NOT back"). kubectl drain reads
    --timeout=0 as "no limit", so a user may well write 0: every wait of cargoship is refused at 0, before
    any host; the waits that may be 0 (a pause, a settle time) still are."""
    phases = validate_input.load_phases()
    waits = (
        "cargoship_drain_timeout",
        "cargoship_service_timeout",
        "cargoship_ready_timeout",
        "cargoship_proof_timeout",
    )
    given = {"cargoship_engine": "k3s", **{name: "0" for name in waits}, "cargoship_engine_settle": 0}
    given["cargoship_pause_between_nodes"] = "0"
    found = sorted(item[0] for item in validate_input.host_problems(given, phases))
    assert found == [
        f"{name}: expected 1 s or more, got 0: a wait of 0 s gives up at once (it is not 'no limit')"
        for name in sorted(waits)
    ]
    assert validate_input.host_problems({"cargoship_engine": "k3s", **{name: 1 for name in waits}}, phases) == []


@pytest.mark.parametrize("key", ["registries", "audit_policy", "pod_security", "chart_values"])
def test_a_string_other_than_absent_is_one_error_not_two(key):
    """ "Absent" (a capital letter) for a kind the engine reads from a file: named once, as what it is,
    not a second time as the mapping it is not."""
    problems = ds.problems_of({"engine": "k3s", key: "Absent"})
    assert [message for message, _value in problems.found] == [
        f"{ds.VARIABLES[key]}: expected a mapping, or absent to remove what cargoship wrote, got 'Absent'"
    ]


def test_status_refuses_an_invalid_desired_state_before_asking_the_api(tmp_path):
    """The map compares each node with the inventory's desired state: one no run would take is an input
    error, named as engine-config-sync names it (it was hashed and every node called not the desired state)."""
    inventory = bad_inventory(tmp_path, {"cargoship_registries": [1], "cargoship_registires": {}})
    result = cargoship("status", "-i", str(inventory))
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown
    assert "cargoship_registries: expected a mapping, got a list (c1, w1, w2;" in shown
    assert "cargoship_registires: unknown variable (did you mean cargoship_registries?)" in shown
    assert "cannot reach the Kubernetes API" not in shown and "Traceback" not in shown


def test_unlock_with_a_limit_matching_no_host_says_so(tmp_path):
    inventory = bad_inventory(tmp_path, {})
    result = cargoship("unlock", "-i", str(inventory), "--yes", "--limit", "no-such-host")
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith("unlock failed\n")
    assert "leaves us with no hosts to target" in result.stderr


@pytest.mark.parametrize(
    ("given", "whole", "hint"),
    [
        (None, True, "--ask-vault-pass"),
        ("wrong", True, "does not open"),
        (None, False, "--ask-vault-pass"),
    ],
    ids=["file-no-password", "file-wrong-password", "value-no-password"],
)
def test_a_vaulted_inventory_without_its_password_gets_a_hint(tmp_path, given, whole, hint):
    """A whole vaulted file stops Ansible as it reads the inventory; a vaulted value (encrypt_string) stops
    the input check, which cannot read the variable: both say which option gives the password."""
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    inventory = bad_inventory(tmp_path, {})
    vault = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(b"right"))])
    if whole:
        (tmp_path / "group_vars" / "workers.yml").write_bytes(vault.encrypt("registry_password: s3cr3t-c4n4ry\n"))
    else:
        value = vault.encrypt("s3cr3t-c4n4ry").decode().replace("\n", "\n      ")
        (tmp_path / "group_vars" / "workers.yml").write_text(
            "cargoship_registries:\n  configs:\n    r.example:\n      auth:\n        username: u\n"
            f"        password: !vault |\n          {value.replace(chr(10) + '      ', chr(10) + '          ')}\n"
        )
    args = ["engine-config-sync", "-i", str(inventory), "--dry-run"]
    if given:
        (tmp_path / "pw").write_text(given)
        args += ["--vault-password-file", str(tmp_path / "pw")]
    result = cargoship(*args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert hint in result.stderr and "c4n4ry" not in result.stdout + result.stderr
    assert whole or "cargoship_registries: its value cannot be read" in result.stdout + result.stderr


def test_a_value_that_reads_as_a_broken_template_is_named_with_the_unsafe_hint_and_never_shown(tmp_path):
    """Ansible templates the inventory's strings: a registry password holding ``{{`` fails to read. The input
    check names the variable, the hint says how to write it literally, and the value appears nowhere."""
    inventory = bad_inventory(tmp_path, {})
    (tmp_path / "group_vars" / "workers.yml").write_text(
        "cargoship_registries:\n  configs:\n    r.example:\n      auth:\n        username: u\n"
        "        password: 'c4n4ry{{x'\n"
    )
    result = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run")
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown
    assert "cargoship_registries: its value cannot be read: Syntax error in template" in shown
    assert "marked in YAML with !unsafe" in result.stderr and "c4n4ry" not in shown


def test_the_phase_list_in_a_pipe_keeps_each_line_whole():
    """Off a terminal the command prints each line as long as it is: rich folded the lock phase's dry-run line
    at 80 columns ("stale (and" / "whose) or held"), so a grep for it found half."""
    from cargoship_runner.collection import phases

    result = cargoship("phase", "list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for phase in (p for p in phases() if p["assessment"]):
        assert f"      dry run: {phase['dry_run_label']} ({phase['assessment']})" in lines, phase["name"]
    assert any(len(line) > 80 for line in lines)


def only_message(found: list[tuple[str, str | None]]) -> str:
    assert len(found) == 1, found
    return found[0][0]


def test_a_connection_the_lock_keeper_cannot_use_is_an_input_error():
    """The run keeps each host's lock fresh with ssh commands of its own (or on the node itself): a password
    login or another connection plugin failed the run only once every host was locked."""
    assert validate_input.connection_problems({}) == []
    assert validate_input.connection_problems({"ansible_connection": "local", "ansible_password": "p"}) == []
    assert validate_input.connection_problems({"ansible_connection": "ansible.builtin.ssh"}) == []
    paramiko = only_message(validate_input.connection_problems({"ansible_connection": "paramiko_ssh"}))
    assert paramiko.startswith("ansible_connection: 'paramiko_ssh' is not a connection cargoship can use")
    password = only_message(validate_input.connection_problems({"ansible_ssh_pass": "s3cr3t"}))
    assert password.startswith("ansible_ssh_pass: SSH with a password is not supported") and "s3cr3t" not in password
    assert validate_input.connection_problems({"ansible_password": ""}) == []  # Ansible ignores an empty one

    class Vaulted(dict):
        def get(self, name, default=None):
            if name == "ansible_password":
                raise validate_input.AnsibleError("no vault secrets found")
            return super().get(name, default)

    vaulted = only_message(validate_input.connection_problems(Vaulted(ansible_password="$ANSIBLE_VAULT;1.1")))
    assert vaulted.startswith("ansible_password: SSH with a password is not supported")
    asked = only_message(validate_input.connection_problems({"ansible_password": ""}, ask_pass=True))
    assert asked.startswith("the connection password (--ask-pass, --connection-password-file): SSH with a password")


def test_a_password_login_in_the_inventory_is_refused_before_any_host_naming_its_file(tmp_path):
    inventory = bad_inventory(tmp_path, {"ansible_password": "c4n4ry-pw"})
    result = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run")
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown
    assert "ansible_password: SSH with a password is not supported" in shown
    assert "group_vars/all.yml" in shown and "c4n4ry" not in shown and "UNREACHABLE" not in shown


@pytest.mark.parametrize("only", ["controllers", "workers"])
def test_status_maps_an_inventory_with_one_kind_of_node_only(kube, tmp_path, only):
    """An inventory of controllers alone (a one-node k3s, a control plane) has no workers group at all: the
    status playbook added the two groups up and failed with a template error instead of a map."""
    kube.node("n1")
    (tmp_path / "kubeconfig").write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {
                        "name": "k",
                        "cluster": {"server": kube.access["host"], "certificate-authority": kube.access["ca_cert"]},
                    }
                ],
                "users": [{"name": "k", "user": {"token": kube.access["api_key"]}}],
                "contexts": [{"name": "k", "context": {"cluster": "k", "user": "k"}}],
                "current-context": "k",
            }
        )
    )
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {"cargoship_engine": "k3s", "cargoship_api_kubeconfig": str(tmp_path / "kubeconfig")},
                    "children": {only: {"hosts": {"n1": {"ansible_host": "127.0.0.1", "ansible_port": 9}}}},
                }
            }
        )
    )
    result = cargoship("status", "-i", str(inventory))
    shown = result.stdout + result.stderr
    assert result.returncode == 0, shown
    assert "1 node in the cluster;" in shown, shown
    assert "n1" in shown and "Error rendering template" not in shown


def test_a_host_that_cannot_be_reached_is_named_from_the_runs_closing_stats(tmp_path):
    """The command writes none of ansible-runner's events into the run's directory but the closing stats
    (GuardedHandler), and names the unreachable hosts from them: exit 3, the host named."""
    path = tmp_path / "hosts.yml"
    closed = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "ssh", "cargoship_engine": "k3s"}
    path.write_text(yaml.safe_dump({"all": {"vars": closed, "children": {"controllers": {"hosts": {"c9": None}}}}}))
    result = cargoship("unlock", "-i", str(path), "--yes")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "unreachable: c9" in result.stdout + result.stderr


def test_an_inventory_read_only_in_part_stops_the_run_naming_why_before_any_host(tmp_path):
    """A host name with square brackets reads as a range in a YAML inventory, and the yaml plugin stops there:
    Ansible's default only warns and goes on with the hosts read before it. Here the workers group would be
    lost, and the run would have gone on with the controller alone, saying nothing of the workers."""
    path = tmp_path / "hosts.yml"
    closed = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "ssh", "cargoship_engine": "k3s"}
    workers = {"w1": None, "w2[prod]": None}
    groups = {"controllers": {"hosts": {"c1": None}}, "workers": {"hosts": workers}}
    path.write_text(yaml.safe_dump({"all": {"vars": closed, "children": groups}}))
    result = cargoship("engine-config-sync", "-i", str(path), "--dry-run")
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown
    assert f"Completely failed to parse inventory source {path}" in result.stderr
    assert "Failed to parse inventory with 'yaml' plugin: host range must be" in result.stderr
    # Stopped before any host: nothing was tried on c1 (its closed port would have made it unreachable).
    assert "unreachable" not in shown and "c1" not in shown


def test_only_the_closing_stats_are_written_unless_the_run_directory_is_kept():
    dropped = GuardedHandler(lambda event: None, keep_events=False)
    assert [dropped({"event": e}) for e in ("runner_on_ok", "playbook_on_stats")] == [False, True]
    kept = GuardedHandler(None, keep_events=True)
    assert kept({"event": "runner_on_ok"}) is True
