"""An execution environment built with ansible-builder gets what the collection needs."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BUILDER = str(Path(sys.executable).parent / "ansible-builder")


def requirement(lines, name):
    return next(line.split("#")[0].strip() for line in lines if re.match(rf"^'?{name}\b", line.strip(), re.I))


def test_ansible_builder_finds_the_collections_python_and_system_requirements():
    found = subprocess.run(
        [BUILDER, "introspect", str(REPO / ".collections")], capture_output=True, text=True, check=False
    )
    assert found.returncode == 0, found.stderr
    data = yaml.safe_load(found.stdout)
    assert any(line.startswith("kubernetes") and "cargoship.engine" in line for line in data["python"])
    assert any(line.startswith("openssh-client [platform:dpkg]") for line in data["system"])


def test_the_execution_environment_pins_what_the_command_pins():
    """The EE's kubernetes and the wheel's are the same range, and the EE's ansible-core is one we test."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    ee = (REPO / "meta" / "ee-requirements.txt").read_text().splitlines()
    assert requirement(ee, "kubernetes") == requirement(project, "kubernetes")
    definition = yaml.safe_load((REPO / "docs" / "awx" / "execution-environment.yml").read_text())
    assert definition["dependencies"]["ansible_core"]["package_pip"] == requirement(project, "ansible-core")
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert runtime == ">=2.19.0,<2.21.0"


def test_the_awx_definition_makes_a_build_context(tmp_path):
    made = subprocess.run(
        [BUILDER, "create", "-f", str(REPO / "docs" / "awx" / "execution-environment.yml"), "-c", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    containerfile = (tmp_path / "Containerfile").read_text()
    assert "ansible-core>=2.19,<2.21" in containerfile
    assert "ansible-galaxy collection install" in containerfile
    required = yaml.safe_load((tmp_path / "_build" / "requirements.yml").read_text())
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    assert required["collections"] == [{"name": f"collections/cargoship-engine-{version}.tar.gz", "type": "file"}]


def test_the_collection_tarball_carries_the_collection_alone(tmp_path):
    """What `make collection` builds: the collection's own files, none of the checkout's test bed or packaging."""
    import tarfile

    galaxy = str(Path(sys.executable).parent / "ansible-galaxy")
    built = subprocess.run(
        [galaxy, "collection", "build", "--output-path", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (tarball,) = tmp_path.glob("cargoship-engine-*.tar.gz")
    names = tarfile.open(tarball).getnames()
    tops = {name.split("/")[0] for name in names}
    assert {"plugins", "roles", "playbooks", "meta", "MANIFEST.json", "FILES.json", "README.md"} <= tops
    assert not tops & {"tests", "molecule", "setup.py", "cargoship_runner", "dist", "Makefile", "pyproject.toml"}
    assert not [top for top in tops if top.startswith(".")]  # no checkout state (.venv, .lab, caches, .git)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
