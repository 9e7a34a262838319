"""Credentials never leave the places they belong (the engine's file on the host, the user's kubeconfig):
not the hosts' journals, not Ansible's output at -vvvv, not ansible-runner's artifacts, not the report,
not a diff. Canaries hold a quote, a backslash and non-ASCII, which files store escaped; each carries a
plain marker that survives any escaping, and that marker is what the tests look for."""

from __future__ import annotations

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
MARKERS = ("OLDCANARY1", "NEWCANARY2", "CHARTCANARY3")
KEPT = re.compile(r"kept in (\S+)")


def with_password(lab, directory: Path, password: str) -> Path:
    inventory = desired_inventory(lab, directory)
    state = yaml.safe_load((inventory / "group_vars" / "all.yml").read_text())
    state["cargoship_registries"]["configs"]["registry.internal.example:5000"]["auth"]["password"] = password
    state["ingress_chart_values"]["k3s"]["traefik"]["values"]["dashboard"] = {"adminPassword": CHART_SECRET}
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


def registries_on(lab, name: str) -> dict:
    return yaml.safe_load(lab.sh(name, "cat /etc/rancher/k3s/registries.yaml").stdout)


@pytest.fixture(scope="module")
def fleet(lab_manager):
    return lab_manager.get(hosts=3, controllers=1, engine="k3s")


def test_a_rotated_registry_password_shows_as_changed_and_reaches_no_log_diff_report_or_journal(fleet, tmp_path):
    old = with_password(fleet, tmp_path / "old", OLD)
    first = cargoship("engine-config-sync", "-i", str(old), "--confirm", "-vvvv", "--keep-artifacts")
    assert first.returncode == 0, first.stdout + first.stderr
    assert registries_on(fleet, "w1")["configs"]["registry.internal.example:5000"]["auth"]["password"] == OLD
    seen = {"first run": first.stdout + first.stderr, "first run artifacts": tree_text(artifacts_of(first))}

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

    real = cargoship("engine-config-sync", "-i", str(new), "--confirm", "-vvvv", "--keep-artifacts")
    assert real.returncode == 0, real.stdout + real.stderr
    assert registries_on(fleet, "w1")["configs"]["registry.internal.example:5000"]["auth"]["password"] == NEW
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
