"""What cargoship knows of each engine (units, default paths) is written once, in
plugins/module_utils/_engines.py; roles and playbooks take it from the engine facts."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.cargoship.engine.plugins.module_utils._engines import ENGINES, LOCK_PATH

REPO = Path(__file__).resolve().parents[2]


def known_literals() -> set[str]:
    found = {LOCK_PATH}
    for facts in ENGINES.values():
        found |= set(facts["services"].values()) - {"k3s"}  # "k3s" is also the engine's name
        found |= {facts[k] for k in ("config_file", "data_dir", "private_registry", "admin_kubeconfig")}
    return found


def test_no_role_or_playbook_writes_an_engine_fact_of_its_own():
    offenders = []
    for path in [*REPO.glob("roles/*/*/*.yml"), *REPO.glob("playbooks/**/*.yml")]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            if any(re.search(rf"(?<![\w/-]){re.escape(literal)}(?![\w-])", line) for literal in known_literals()):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
            if "/etc/rancher/" in line or "/var/lib/rancher/" in line:
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


def test_no_module_code_spells_an_engine_fact_outside_the_engines_table():
    """Module and plugin code (their documentation strings aside) imports the table."""
    offenders = []
    for path in REPO.glob("plugins/**/*.py"):
        if path.name == "_engines.py":
            continue
        code = re.sub(r'(DOCUMENTATION|EXAMPLES|RETURN) = r?"""(.|\n)*?"""', "", path.read_text())
        code = re.sub(r'^\s*"""(.|\n)*?"""', "", code, flags=re.M)  # docstrings
        code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("#"))
        for literal in known_literals():
            if re.search(rf'["\']{re.escape(literal)}["\']', code):
                offenders.append(f"{path.relative_to(REPO)}: {literal}")
    assert offenders == []
