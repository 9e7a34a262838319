"""cargoship among the user's own Ansible: their collections and inventory plugins, their kubeconfig
habits, -v, --diff, several inventories and vault ids; and the command installed from its wheel, outside
the checkout, on another Python and ansible-core."""

from __future__ import annotations

import base64
import glob
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import cargoship, desired_inventory

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
THEIR_COLLECTIONS = Path(__file__).resolve().parent / "collections"
SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text())


@pytest.fixture
def lab(lab_manager):
    """A controller (c1) and a worker (w1): these tests are about Ansible's world around the command, not
    about the order of a rollout, and each run on a host fewer costs about a quarter less."""
    return lab_manager.get(hosts=2, controllers=1, engine="k3s")


def run(*args: str, env: dict | None = None, drop: tuple = (), cwd: Path | None = None, command=("cargoship",)):
    """The command with changes to the environment (``drop``: variables removed)."""
    environment = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in drop}
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=900, check=False, env=environment, cwd=cwd
    )


def drifted(lab, directory: Path, marker: str) -> Path:
    """The example desired state plus a registry mirror no host has yet: every host has work to do."""
    state = yaml.safe_load((REPO / "examples" / "group_vars" / "all.yml").read_text())
    registries = state.get("cargoship_registries") or {}
    registries.setdefault("mirrors", {})[f"{marker}.example.org"] = {"endpoint": [f"https://{marker}.mirror.example"]}
    return desired_inventory(lab, directory, cargoship_registries=registries)


def listed_inventory(lab, path: Path) -> Path:
    """The lab's hosts as the acme.tools.listed inventory plugin of another collection reads them."""
    plain = yaml.safe_load(lab.inventory.read_text())["all"]
    groups = {name: group["hosts"] for name, group in plain["children"].items()}
    path.write_text(yaml.safe_dump({"plugin": "acme.tools.listed", "vars": plain["vars"], "groups": groups}))
    return path


def stamping_hooks(directory: Path, stamp: str) -> dict:
    """Hooks whose task file uses acme.tools.stamp, a module of the user's other collection."""
    tasks = directory / "stamp.yml"
    tasks.write_text(
        yaml.safe_dump(
            [{"name": "Stamp", "acme.tools.stamp": {"path": f"/tmp/{stamp}", "text": "{{ inventory_hostname }}"}}]
        )
    )
    hook = [{"name": "stamp with acme.tools", "tasks": str(tasks)}]
    return {"host_facts.after.controller": hook, "host_facts.after.worker": hook}


@pytest.mark.parametrize("configured_by", ["environment", "ansible.cfg"])
def test_the_users_collections_stay_found_an_inventory_plugin_and_a_hook_module(lab, tmp_path, configured_by):
    stamp = f"acme-stamp-{configured_by.replace('.', '-')}"
    for name in lab.hosts:
        lab.sh(name, f"rm -f /tmp/{stamp}")
    inventory = listed_inventory(lab, tmp_path / "fleet.listed.yml")
    extra = tmp_path / "hooks.yml"
    extra.write_text(yaml.safe_dump({"cargoship_hooks": stamping_hooks(tmp_path, stamp)}))
    if configured_by == "environment":
        env, drop = {"ANSIBLE_COLLECTIONS_PATH": str(THEIR_COLLECTIONS)}, ()
    else:
        # Their project's ansible.cfg names a collections directory relative to itself.
        project = tmp_path / "project"
        shutil.copytree(THEIR_COLLECTIONS, project / "collections")
        (project / "ansible.cfg").write_text("[defaults]\ncollections_path = ./collections\n")
        env, drop = {"ANSIBLE_CONFIG": str(project / "ansible.cfg")}, ("ANSIBLE_COLLECTIONS_PATH",)
    # A read-only phase alone: it runs for real without --confirm.
    result = run("phase", "run", "host_facts", "-i", str(inventory), "-e", f"@{extra}", env=env, drop=drop)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in lab.hosts:
        assert lab.sh(name, f"cat /tmp/{stamp}").stdout == name


def test_verbose_shows_ansibles_output_and_a_failed_run_keeps_a_masked_log(lab, tmp_path):
    inventory = desired_inventory(lab, tmp_path / "inv")
    verbose = cargoship("phase", "run", "host_facts", "-i", str(inventory), "-v")
    assert verbose.returncode == 0, verbose.stdout + verbose.stderr
    assert "TASK [cargoship.engine.host_facts" in verbose.stdout
    assert "PLAY RECAP" in verbose.stdout

    # A hook task file with a mistake: Ansible quotes the file's lines under the error, a credential with them.
    canary = "hook-file-canary-51c2"
    broken = tmp_path / "broken.yml"
    broken.write_text(f"- name: Broken\n  ansible.builtin.debug:\n    msg: hi\n  registry_password: {canary}\n")
    hooks = tmp_path / "hooks.yml"
    hook = [{"name": "broken", "tasks": str(broken)}]
    hooks.write_text(yaml.safe_dump({"cargoship_hooks": {"host_facts.after.worker": hook}}))
    state = tmp_path / "state"
    failed = run(
        "phase",
        "run",
        "host_facts",
        "-i",
        str(inventory),
        "-e",
        f"@{hooks}",
        "-vvv",
        env={"XDG_STATE_HOME": str(state)},
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    kept = next(line for line in failed.stderr.splitlines() if "Ansible's output of this run is kept in" in line)
    log = Path(kept.rsplit(" ", 1)[1])
    assert log.parent == state / "cargoship" / "logs"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    text = log.read_text()
    assert "conflicting action statements" in text or "registry_password" in text, text[-2000:]
    for output in (text, failed.stdout, failed.stderr):
        assert canary not in output


def test_diff_in_the_terminal_and_the_report_alone_on_standard_output(lab, tmp_path):
    inventory = drifted(lab, tmp_path / "inv", "diffcheck")
    dry = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run", "--diff", "--report-json", "-")
    assert dry.returncode == 0, dry.stdout[-2000:] + dry.stderr
    report = json.loads(dry.stdout)  # nothing but the report on standard output
    import jsonschema

    jsonschema.validate(report, SCHEMA)
    assert report["schema_version"] == 1
    for name in lab.hosts:
        phase = "sync_controller" if name in lab.controllers else "sync_worker"
        header = rf"^# {phase} on {name}: (create|update) /etc/rancher/k3s/registries.yaml$"
        assert re.search(header, dry.stderr, re.M), dry.stderr[-3000:]
    assert re.search(r"^\+ .*https://diffcheck\.mirror\.example", dry.stderr, re.M)
    # Not a terminal: the report's lines are whole, a phase's hosts on its one line.
    line = next(line for line in dry.stderr.splitlines() if line.startswith("8 ") and "sync_worker" in line)
    assert all(f"{name}: " in line for name in lab.workers)


def test_several_inventory_sources_and_a_vault_id(lab, tmp_path):
    inventory = drifted(lab, tmp_path / "inv", "vaultid")
    # The hosts in one source, the desired state in another; a registry password vaulted with a labelled id.
    state = yaml.safe_load((inventory / "group_vars" / "all.yml").read_text())
    (inventory / "group_vars" / "all.yml").unlink()
    secret = tmp_path / "prod.pass"
    secret.write_text("prod vault password\n")
    vaulted = subprocess.run(
        ["ansible-vault", "encrypt_string", "--vault-id", f"prod@{secret}", "vault-id-canary-77", "--name", "password"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    state["cargoship_registries"].setdefault("configs", {})["vaultid.example.org"] = {
        "auth": {"username": "ci", "password": "PLACEHOLDER"}
    }
    text = yaml.safe_dump({"all": {"vars": state}})
    text = text.replace("password: PLACEHOLDER", vaulted.strip().replace("\n", "\n" + " " * 10))
    (tmp_path / "state.yml").write_text(text)
    args = ["engine-config-sync", "-i", str(inventory / "hosts.yml"), "-i", str(tmp_path / "state.yml"), "--dry-run"]
    without = cargoship(*args)
    assert without.returncode == 1
    result = cargoship(
        *args, "--vault-id", f"prod@{secret}", "--detailed-exitcode", "--report-json", str(tmp_path / "r")
    )
    assert result.returncode == 2, result.stdout + result.stderr
    report = json.loads((tmp_path / "r").read_text())
    workers = next(p for p in report["phases"] if p["name"] == "sync_worker")
    assert any("registries.yaml" in json.dumps(c) for c in workers["hosts"]["w1"]["changes"])
    assert "vault-id-canary-77" not in result.stdout + result.stderr + json.dumps(report)


def lab_kubeconfig(lab, path: Path) -> dict:
    """The lab's kubeconfig with its context named ``lab``, behind a current context ``broken`` whose
    server answers nothing; returns the lab's API URL, token and CA file."""
    config = yaml.safe_load(lab.kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    ca = path.parent / "ca.crt"
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "lab", "cluster": cluster},
                    {"name": "broken", "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}},
                ],
                "users": [{"name": "lab", "user": user}],
                "contexts": [
                    {"name": "lab", "context": {"cluster": "lab", "user": "lab"}},
                    {"name": "broken", "context": {"cluster": "broken", "user": "lab"}},
                ],
                "current-context": "broken",
            }
        )
    )
    return {"url": cluster["server"], "token": user["token"], "ca": str(ca)}


def test_kubernetes_access_as_with_kubernetes_core(lab, tmp_path):
    inventory = desired_inventory(lab, tmp_path / "inv")
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    del hosts["all"]["vars"]["cargoship_api_kubeconfig"]
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    kubeconfig = tmp_path / "kube" / "config"
    kubeconfig.parent.mkdir()
    api = lab_kubeconfig(lab, kubeconfig)
    # engine_facts asks the API which node each host is: the first phase that needs it.
    phase = ("phase", "run", "engine_facts", "-i", str(inventory))

    current = run(*phase, env={"KUBECONFIG": str(kubeconfig)})
    assert current.returncode == 1, "the current context's server answers nothing"
    assert f"cannot reach the Kubernetes API with the kubeconfig {kubeconfig}" in current.stdout + current.stderr

    by_option = run(*phase, "-e", "cargoship_api_context=lab", env={"KUBECONFIG": str(kubeconfig)})
    assert by_option.returncode == 0, by_option.stdout + by_option.stderr

    by_k8s_auth = run(*phase, env={"K8S_AUTH_KUBECONFIG": str(kubeconfig), "K8S_AUTH_CONTEXT": "lab"})
    assert by_k8s_auth.returncode == 0, by_k8s_auth.stdout + by_k8s_auth.stderr

    no_kubeconfig = {
        "KUBECONFIG": str(tmp_path / "none"),
        "K8S_AUTH_HOST": api["url"],
        "K8S_AUTH_API_KEY": api["token"],
        "K8S_AUTH_SSL_CA_CERT": api["ca"],
    }
    by_host = run(*phase, env=no_kubeconfig)
    assert by_host.returncode == 0, by_host.stdout + by_host.stderr
    assert api["token"] not in by_host.stdout + by_host.stderr


def other_python(version: str) -> str:
    """The interpreter of another Python version: one pyenv installed, else one on PATH that runs (a
    pyenv shim is on PATH even for versions it cannot run)."""
    root = Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser()
    found = next(iter(sorted(glob.glob(str(root / "versions" / f"{version}.*" / "bin" / f"python{version}")))), None)
    on_path = shutil.which(f"python{version}")
    if (
        not found
        and on_path
        and subprocess.run([on_path, "-c", "pass"], capture_output=True, check=False).returncode == 0
    ):
        found = on_path
    if not found:
        pytest.fail(f"no Python {version} on this machine (PATH or pyenv): the supported versions must be tested")
    return found


def test_the_wheel_works_outside_the_checkout_on_python_3_12_and_ansible_core_2_20(lab, tmp_path):
    """The wheel installed into a fresh virtualenv, then the main job from another directory."""
    # Built from a copy of the checkout's files: a build writes build/ and *.egg-info beside its sources,
    # and `make test` installs the checkout into the compat virtualenvs meanwhile.
    source = tmp_path / "source"
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file() and not name.startswith(".collections/"):
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    dist = tmp_path / "dist"
    built = run("wheel", "-q", "--no-deps", "-w", str(dist), str(source), command=(sys.executable, "-m", "pip"))
    assert built.returncode == 0, built.stderr
    wheel = next(dist.glob("cargoship-*.whl"))
    venv = tmp_path / "venv"
    # Made and filled by uv (a dependency of the test extras, as for `make compat`): the same wheel install
    # as pip's, for about a fortieth of the CPU (pip compiles every installed module: 22 s of it here).
    uv = (str(Path(sys.executable).with_name("uv")),)
    made = run("venv", "-q", "--python", other_python("3.12"), str(venv), command=uv)
    assert made.returncode == 0, made.stderr
    installed = run(
        "pip",
        "install",
        "-q",
        "--python",
        str(venv / "bin" / "python"),
        str(wheel),
        "ansible-core>=2.20,<2.21",
        command=uv,
    )
    assert installed.returncode == 0, installed.stderr
    core = run("--version", command=(str(venv / "bin" / "ansible-playbook"),)).stdout
    assert "core 2.20." in core and "python version = 3.12" in core, core

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    inventory = drifted(lab, elsewhere / "inv", "wheel")
    # Nothing of the checkout: not its ansible.cfg, not its virtualenv, not its directory.
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin"}
    drop = ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "VIRTUAL_ENV", "PYTHONPATH")
    command = (str(venv / "bin" / "cargoship"),)

    listed = run("phase", "list", env=env, drop=drop, cwd=elsewhere, command=command)
    assert listed.returncode == 0, listed.stderr
    assert "sync_worker" in listed.stdout
    args = ("engine-config-sync", "-i", str(inventory))
    dry = run(*args, "--dry-run", "--detailed-exitcode", env=env, drop=drop, cwd=elsewhere, command=command)
    assert dry.returncode == 2, dry.stdout + dry.stderr
    real = run(*args, "--confirm", env=env, drop=drop, cwd=elsewhere, command=command)
    assert real.returncode == 0, real.stdout + real.stderr
    again = run(*args, "--dry-run", "--detailed-exitcode", env=env, drop=drop, cwd=elsewhere, command=command)
    assert again.returncode == 0, again.stdout + again.stderr
    for name in lab.hosts:
        assert "wheel.mirror.example" in lab.sh(name, "cat /etc/rancher/k3s/registries.yaml").stdout
