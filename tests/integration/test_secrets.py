"""Credentials never leave the places they belong (the engine's file on the host, the user's kubeconfig):
not the hosts' journals, not Ansible's output at -vvvv, not ansible-runner's artifacts, not the report,
not a diff. Canaries hold a quote, a backslash and non-ASCII, which files store escaped; each carries a
plain marker that survives any escaping, and that marker is what the tests look for."""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import cargoship, desired_inventory

pytestmark = pytest.mark.lab

OLD = 'old"pass\\wörd-OLDCANARY1'
NEW = 'new"pass\\wört-NEWCANARY2'
CHART_SECRET = "chart\\pw-CHARTCANARY3"
# Chart values whose keys the old credential pattern missed, a list, a number, a path the user marks
# secret, a values text, and a mirror endpoint's user-info: none is named "password".
CHART_CANARIES = {
    "s3": {"secretKey": "sk-SECRETKEYCANARY4", "accessKey": "ak-ACCESSKEYCANARY5"},
    "tls.key": "-----BEGIN PRIVATE KEY----- TLSKEYCANARY6",
    "passwords": ["first-LISTCANARY7", "second-LISTCANARY7"],
    "adminPin": 918273645,
    "dashboard": {"note": "marked-MARKEDCANARY8"},
}
TEXT_VALUES = "aws_secret_access_key: TEXTCANARY9\nregion: eu-west-1\n"
ENDPOINT = "https://fleet-pull:ENDPOINTCANARY10@registry.internal.example:5000"
MARKERS = (
    "OLDCANARY1",
    "NEWCANARY2",
    "CHARTCANARY3",
    "SECRETKEYCANARY4",
    "ACCESSKEYCANARY5",
    "TLSKEYCANARY6",
    "LISTCANARY7",
    "918273645",
    "MARKEDCANARY8",
    "TEXTCANARY9",
    "ENDPOINTCANARY10",
)
KEPT = re.compile(r"kept in (\S+)")


def with_password(lab, directory: Path, password: str) -> Path:
    inventory = desired_inventory(lab, directory)
    state = yaml.safe_load((inventory / "group_vars" / "all.yml").read_text())
    state["cargoship_registries"]["configs"]["registry.internal.example:5000"]["auth"]["password"] = password
    values = state["ingress_chart_values"]["k3s"]["traefik"]["values"]
    values.update(CHART_CANARIES)
    values["dashboard"] = {**CHART_CANARIES["dashboard"], "adminPassword": CHART_SECRET}
    state["ingress_chart_values"]["k3s"]["canary-app"] = {"namespace": "default", "values": TEXT_VALUES}
    state["cargoship_secret_paths"] = ["traefik.dashboard.note"]
    state["cargoship_registries"]["mirrors"]["docker.io"]["endpoint"].append(ENDPOINT)
    (inventory / "group_vars" / "all.yml").write_text(yaml.safe_dump(state, allow_unicode=False))
    return inventory


def file_diff(report: str, phase: str, host: str, path_end: str) -> str:
    changes = next(p for p in json.loads(report)["phases"] if p["name"] == phase)["hosts"][host]["changes"]
    return next(c["diff"] for c in changes if isinstance(c, dict) and c["file"].endswith(path_end))


def leaks(text: str) -> list[str]:
    return [marker for marker in MARKERS if marker in text]


def artifacts_of(result: subprocess.CompletedProcess) -> Path:
    found = KEPT.search(result.stderr)
    assert found, result.stderr
    return Path(found.group(1))


def tree_text(directory: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in directory.rglob("*") if p.is_file())


def put(lab, name: str, path: str, text: str) -> None:
    encoded = base64.b64encode(text.encode()).decode()
    lab.sh(name, f"echo {encoded} | base64 -d > {path}")


def registries_on(lab, name: str) -> dict:
    return yaml.safe_load(lab.sh(name, "cat /etc/rancher/k3s/registries.yaml").stdout)


@pytest.fixture(scope="module")
def fleet(lab_manager):
    """A controller (c1) and a worker (w1): each file cargoship writes is on one of them."""
    return lab_manager.get(hosts=2, controllers=1, engine="k3s")


def test_a_rotated_registry_password_shows_as_changed_and_reaches_no_log_diff_report_or_journal(fleet, tmp_path):
    old = with_password(fleet, tmp_path / "old", OLD)
    written = tmp_path / "first.json"
    first = cargoship(
        "engine-config-sync", "-i", str(old), "--confirm", "-vvvv", "--keep-artifacts", "--report-json", str(written)
    )
    assert first.returncode == 0, first.stdout + first.stderr
    # The chart values as their diffs show them: masked by structure, settings and flags as they are.
    assert 'secretKey: "********' in file_diff(written.read_text(), "sync_controller", "c1", "cargoship-traefik.yaml")
    text_chart = file_diff(written.read_text(), "sync_controller", "c1", "cargoship-default-canary-app.yaml")
    assert 'aws_secret_access_key: "********' in text_chart and "region: eu-west-1" in text_chart, text_chart
    # The endpoint the first run added, its user-info masked.
    endpoints = file_diff(written.read_text(), "sync_worker", "w1", "registries.yaml")
    assert '+      - "https://********@registry.internal.example:5000"' in endpoints, endpoints
    seen = {"first run": first.stdout + first.stderr, "first run artifacts": tree_text(artifacts_of(first))}
    seen["first report"] = written.read_text()
    assert registries_on(fleet, "w1")["configs"]["registry.internal.example:5000"]["auth"]["password"] == OLD
    assert ENDPOINT in registries_on(fleet, "w1")["mirrors"]["docker.io"]["endpoint"]
    # Written where they belong, exactly as given: the values text as it is, the values as data.
    manifests = "/var/lib/rancher/k3s/server/manifests"
    on_c1 = yaml.safe_load(fleet.sh("c1", f"cat {manifests}/cargoship-default-canary-app.yaml").stdout)
    assert on_c1["spec"]["valuesContent"] == TEXT_VALUES
    on_c1 = yaml.safe_load(fleet.sh("c1", f"cat {manifests}/cargoship-traefik.yaml").stdout)
    assert yaml.safe_load(on_c1["spec"]["valuesContent"])["s3"] == CHART_CANARIES["s3"]

    new = with_password(fleet, tmp_path / "new", NEW)
    report = tmp_path / "plan.json"
    report.write_text("{}")
    os.chmod(report, 0o644)  # an older report readable by all: replacing it must not keep that mode
    dry = cargoship(
        "engine-config-sync", "-i", str(new), "--dry-run", "-vvvv", "--keep-artifacts", "--report-json", str(report)
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    plan = report.read_text()
    seen |= {"dry run": dry.stdout + dry.stderr, "report": plan, "dry run artifacts": tree_text(artifacts_of(dry))}
    # The rotation is visible as a change of the password, with neither value.
    diff = file_diff(plan, "sync_worker", "w1", "registries.yaml")
    assert '-      password: "********"' in diff, diff
    assert '+      password: "******** (changed)"' in diff, diff
    assert "username: fleet-pull" in diff, "only credentials are masked"

    plain = subprocess.run(
        ["ansible-playbook", "-i", str(new), "cargoship.engine.engine_config_sync", "--check", "--diff", "-vvvv"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "CARGOSHIP_REPORT_JSON": str(tmp_path / "plain.json")},
    )
    assert plain.returncode == 0, plain.stdout[-3000:]
    assert "******** (changed)" in plain.stdout
    seen |= {"ansible-playbook --check --diff -vvvv": plain.stdout + plain.stderr}

    # The file now belongs to another user and is readable by all: its replacement must not inherit that.
    fleet.sh("w1", "chown 1000:1000 /etc/rancher/k3s/registries.yaml && chmod 0644 /etc/rancher/k3s/registries.yaml")
    real = cargoship("engine-config-sync", "-i", str(new), "--confirm", "-vvvv", "--keep-artifacts")
    assert real.returncode == 0, real.stdout + real.stderr
    assert registries_on(fleet, "w1")["configs"]["registry.internal.example:5000"]["auth"]["password"] == NEW
    assert fleet.sh("w1", "stat -c '%u:%g %a' /etc/rancher/k3s/registries.yaml").stdout.split() == ["0:0", "600"]
    seen |= {"real run": real.stdout + real.stderr, "real run artifacts": tree_text(artifacts_of(real))}
    for name in fleet.hosts:
        seen[f"{name} journal"] = fleet.sh(
            name, "journalctl --no-pager -o cat; cat /var/log/syslog 2>/dev/null", check=False
        ).stdout

    assert {where: leaks(text) for where, text in seen.items() if leaks(text)} == {}
    for result in (first, dry, real):
        directory = artifacts_of(result)
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        subprocess.run(["rm", "-rf", str(directory)], check=True)


def test_the_report_goes_to_standard_output_with_a_dash(fleet, tmp_path):
    inventory = with_password(fleet, tmp_path / "inv", NEW)
    result = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run", "--report-json", "-")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["operation"] == "engine-config-sync"
    assert "cargoship engine-config-sync" in result.stderr  # the table went to standard error
    assert not Path("-").exists()


def test_the_kubeconfig_diff_masks_every_users_credentials_and_keeps_them_in_the_file(fleet, tmp_path):
    local = tmp_path / "kubeconfig"
    other_users = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "other", "cluster": {"server": "https://other.example:6443"}}],
        "users": [
            {"name": "ops", "user": {"token": "ops-token-OTHERTOKEN4", "client-key-data": "S0VZ-OTHERKEY5"}},
            {"name": "sso", "user": {"auth-provider": {"name": "oidc", "config": {"id-token": "id-OIDCTOKEN6"}}}},
            {"name": "aws", "user": {"exec": {"command": "aws", "env": [{"name": "K", "value": "v-EXECENV7"}]}}},
        ],
        "contexts": [{"name": "other", "context": {"cluster": "other", "user": "ops"}}],
        "current-context": "other",
    }
    local.write_text(yaml.safe_dump(other_users))
    local.chmod(0o600)
    admin = yaml.safe_load(fleet.sh("c1", "cat /etc/rancher/k3s/k3s.yaml").stdout)
    admin_user = admin["users"][0]["user"]  # the cluster's own credential: a token or a client key
    admin_key = admin_user.get("client-key-data") or admin_user["token"]
    markers = ("OTHERTOKEN4", "OTHERKEY5", "OIDCTOKEN6", "EXECENV7", admin_key)
    inventory = desired_inventory(fleet, tmp_path / "inv", cargoship_kubeconfig_path=str(local))

    dry = cargoship(
        "engine-config-sync",
        "-i",
        str(inventory),
        "--dry-run",
        "--kubeconfig",
        "-vvvv",
        "--keep-artifacts",
        "--report-json",
        str(tmp_path / "d.json"),
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    plan = (tmp_path / "d.json").read_text()
    diff = file_diff(plan, "kubeconfig", "c1", "kubeconfig")
    assert "'******** (new)'" in diff, diff  # the cluster's credential, new to this file
    real = cargoship(
        "engine-config-sync", "-i", str(inventory), "--confirm", "--kubeconfig", "-vvvv", "--keep-artifacts"
    )
    assert real.returncode == 0, real.stdout + real.stderr
    texts = {
        "dry run": dry.stdout + dry.stderr,
        "report": plan,
        "dry run artifacts": tree_text(artifacts_of(dry)),
        "real run": real.stdout + real.stderr,
        "real run artifacts": tree_text(artifacts_of(real)),
    }
    assert {
        where: [m for m in markers if m in text] for where, text in texts.items() if any(m in text for m in markers)
    } == {}
    merged = yaml.safe_load(local.read_text())
    assert [u["name"] for u in merged["users"]][:3] == ["ops", "sso", "aws"]
    assert merged["users"][0]["user"]["token"] == "ops-token-OTHERTOKEN4", "another user's credentials were lost"
    assert stat.S_IMODE(local.stat().st_mode) == 0o600
    for result in (dry, real):
        subprocess.run(["rm", "-rf", str(artifacts_of(result))], check=True)


def test_a_credential_plugin_planted_in_a_servers_admin_kubeconfig_never_reaches_the_operator(fleet, tmp_path):
    """Root on one controller must not become the operator: an exec plugin in that server's admin
    kubeconfig would run as the operator once the merged entry is the current context."""
    local = tmp_path / "kubeconfig"
    ran = tmp_path / "exec-plugin-ran"
    admin_path = "/etc/rancher/k3s/k3s.yaml"
    original = fleet.sh("c1", f"cat {admin_path}").stdout
    planted = yaml.safe_load(original)
    planted["users"][0]["user"]["exec"] = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "/bin/sh",
        "args": ["-c", f"touch {ran}"],
    }
    planted["clusters"][0]["cluster"]["proxy-url"] = "http://proxy.invalid:3128"
    inventory = desired_inventory(fleet, tmp_path / "inv", cargoship_kubeconfig_path=str(local))
    put(fleet, "c1", admin_path, yaml.safe_dump(planted))
    try:
        result = cargoship("phase", "run", "kubeconfig", "-i", str(inventory), "--confirm")
    finally:
        put(fleet, "c1", admin_path, original)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, output
    assert "user exec (runs a command of the host's choosing as the operator)" in output, output
    assert "cluster proxy-url" in output
    assert not local.exists() and not ran.exists()
    # Put right on the server, the same phase merges it.
    result = cargoship("phase", "run", "kubeconfig", "-i", str(inventory), "--confirm")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exec" not in yaml.safe_load(local.read_text())["users"][0]["user"]
