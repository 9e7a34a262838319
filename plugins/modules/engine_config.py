#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_config
short_description: Compare, write or restore the engine configuration files of one k3s or RKE2 node
version_added: 0.1.0
description:
  - Renders the files a node should have from the desired state (registries, audit policy,
    pod-security admission configuration, chart values) and compares them with the host.
  - With O(state=present), writes every drifted file atomically (temporary file in the same
    directory, then rename), mode 0600, owner root, after copying the previous version to a backup
    directory outside the engine's manifests directory.
  - With O(state=restored), puts back the files of an earlier backup, removing files that did not
    exist before it.
  - Registry credentials are masked in diffs and never returned.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  engine:
    description: The engine installed on the node.
    type: str
    required: true
    choices: [k3s, rke2]
  node_role:
    description:
      - V(server) for controllers, V(agent) for workers. Audit and pod-security files exist on servers only.
      - Required with O(state=present) and O(state=restored).
    type: str
    choices: [server, agent]
  registries:
    description: Content of C(registries.yaml) (mirrors and configs). Omit to leave the file alone.
    type: dict
  audit_policy:
    description: The audit Policy document. Omit to leave audit settings alone.
    type: dict
  pod_security:
    description: The AdmissionConfiguration document for pod-security admission. Omit to leave it alone.
    type: dict
  chart_values:
    description: Chart name to C(namespace) and C(values), written as HelmChartConfig manifests.
    type: dict
  with_charts:
    description: Manage the chart value manifests on this node (one server per cluster).
    type: bool
    default: false
  state:
    description:
      - V(present) makes the files match; V(restored) puts back the backup O(backup_id).
      - V(cleaned) removes temporary files that an interrupted write of this module left in the engine's directories.
    type: str
    default: present
    choices: [present, restored, cleaned]
  backup_id:
    description: Name of the backup taken before writing, or to restore. Required with O(state=restored).
    type: str
  backup_root:
    description: Where backups are kept. Must not be inside the manifests directory.
    type: path
    default: /var/lib/cargoship/backups
  only_kinds:
    description: Restrict to these kinds of file.
    type: list
    elements: str
    choices: [registries, audit_policy, pod_security, config, chart_values]
"""

EXAMPLES = r"""
- name: Show what would change on a worker
  cargoship.engine.engine_config:
    engine: k3s
    node_role: agent
    registries: "{{ cargoship_registries }}"
  check_mode: true
  diff: true

- name: Write the new configuration, keeping a backup
  cargoship.engine.engine_config:
    engine: rke2
    node_role: server
    registries: "{{ cargoship_registries }}"
    audit_policy: "{{ cargoship_audit_policy }}"
    backup_id: "{{ cargoship_run_id }}"
  become: true

- name: Put the previous configuration back
  cargoship.engine.engine_config:
    engine: rke2
    node_role: server
    state: restored
    backup_id: "{{ cargoship_run_id }}"
  become: true

- name: Remove what an interrupted write left behind
  cargoship.engine.engine_config:
    engine: k3s
    state: cleaned
  become: true
"""

RETURN = r"""
changes:
  description: One entry per file that differs (or differed, once written).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The file.
      type: str
    kind:
      description: registries, audit_policy, pod_security, config or chart_values.
      type: str
    action:
      description: V(create), V(update) or, when restoring, V(restore) or V(remove).
      type: str
    diff:
      description: Unified diff of the file, registry credentials masked.
      type: str
    restart:
      description: Whether the engine must restart to read this change.
      type: bool
restart_required:
  description: Whether any change needs an engine restart.
  returned: always
  type: bool
backup_dir:
  description: Where the previous versions were kept.
  returned: when files were written
  type: str
"""

import difflib
import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import (
    InputError,
    engine_paths,
    mask,
    render,
    secrets_of,
    validate,
)

TEMP_PREFIX = ".cargoship-"


def read_current(module: AnsibleModule, path: str) -> str | None:
    if os.path.islink(path):
        module.fail_json(msg=f"refusing to manage {path}: it is a symbolic link (something else put it there)")
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        module.fail_json(msg=f"cannot read {path}: {to_native(exc)}")
    return None


def write_atomically(module: AnsibleModule, path: str, content: str) -> None:
    directory = os.path.dirname(path)
    if os.path.islink(directory):
        module.fail_json(msg=f"refusing to write into {directory}: it is a symbolic link")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chown(tmp, 0, 0)
        module.atomic_move(tmp, path)
        os.chmod(path, 0o600)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        module.fail_json(msg=f"could not write {path}: {to_native(exc)}; the previous file is unchanged", path=path)


def backup_dir_of(module: AnsibleModule) -> str:
    params = module.params
    root = params["backup_root"]
    manifests = engine_paths(params["engine"])["manifests"]
    if os.path.realpath(root).startswith(os.path.realpath(manifests)):
        module.fail_json(
            msg=f"backup_root {root} is inside the manifests directory, where the engine would apply backups"
        )
    if not params["backup_id"] or "/" in params["backup_id"] or params["backup_id"] in (".", ".."):
        module.fail_json(msg="backup_id must be a plain name")
    return os.path.join(root, params["backup_id"])


def take_backup(module: AnsibleModule, directory: str, files: list[dict]) -> None:
    """Record every file about to be written; a file that did not exist is recorded as absent."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    index_path = os.path.join(directory, "index.json")
    index = {}
    if os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as handle:
            index = json.load(handle)
    for number, item in enumerate(files, start=len(index)):
        path = item["path"]
        if path in index:
            continue
        if os.path.exists(path):
            saved = os.path.join(directory, f"{number:03d}-{os.path.basename(path)}")
            shutil.copy2(path, saved)
            os.chmod(saved, 0o600)
            index[path] = saved
        else:
            index[path] = None
    fd, tmp = tempfile.mkstemp(dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(index, handle, indent=2)
    os.replace(tmp, index_path)


def restore(module: AnsibleModule) -> None:
    directory = backup_dir_of(module)
    index_path = os.path.join(directory, "index.json")
    if not os.path.exists(index_path):
        module.exit_json(
            changed=False,
            changes=[],
            restart_required=False,
            msg=f"no backup {module.params['backup_id']}: nothing was written",
        )
    with open(index_path, encoding="utf-8") as handle:
        index = json.load(handle)
    changes = []
    for path, saved in sorted(index.items()):
        current = read_current(module, path)
        if saved is None:
            if current is not None:
                changes.append({"path": path, "kind": "backup", "action": "remove", "restart": True})
                if not module.check_mode:
                    os.unlink(path)
            continue
        with open(saved, encoding="utf-8") as handle:
            previous = handle.read()
        if previous != current:
            changes.append({"path": path, "kind": "backup", "action": "restore", "restart": True})
            if not module.check_mode:
                write_atomically(module, path, previous)
    module.exit_json(changed=bool(changes), changes=changes, restart_required=bool(changes), backup_dir=directory)


def clean(module: AnsibleModule) -> None:
    """Remove the temporary files write_atomically() leaves only when interrupted between create and rename."""
    changes = []
    for root in engine_paths(module.params["engine"])["allowed_roots"]:
        for directory, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(directory, name)
                if name.startswith(TEMP_PREFIX) and os.path.isfile(path) and not os.path.islink(path):
                    changes.append({"path": path, "kind": "temporary", "action": "remove", "restart": False})
                    if not module.check_mode:
                        os.unlink(path)
    module.exit_json(changed=bool(changes), changes=changes, restart_required=False)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "engine": {"type": "str", "required": True, "choices": ["k3s", "rke2"]},
            "node_role": {"type": "str", "choices": ["server", "agent"]},
            # Not no_log as a whole: that would hide mirrors and endpoints from every diff. The credentials
            # inside are registered as no-log values below, which hides exactly them, everywhere.
            "registries": {"type": "dict", "no_log": False},
            "audit_policy": {"type": "dict"},
            "pod_security": {"type": "dict"},
            "chart_values": {"type": "dict"},
            "with_charts": {"type": "bool", "default": False},
            "state": {"type": "str", "default": "present", "choices": ["present", "restored", "cleaned"]},
            "backup_id": {"type": "str"},
            "backup_root": {"type": "path", "default": "/var/lib/cargoship/backups"},
            "only_kinds": {
                "type": "list",
                "elements": "str",
                "choices": ["registries", "audit_policy", "pod_security", "config", "chart_values"],
            },
        },
        required_if=[("state", "restored", ["backup_id", "node_role"]), ("state", "present", ["node_role"])],
        supports_check_mode=True,
    )
    params = module.params
    if params["state"] == "cleaned":
        clean(module)
    if params["state"] == "restored":
        restore(module)
    state = {key: params[key] for key in ("engine", "registries", "audit_policy", "pod_security", "chart_values")}
    module.no_log_values.update(secrets_of({"registries": params["registries"]}))
    try:
        state = validate(state)
        files = render(state, params["node_role"], params["with_charts"])
    except InputError as exc:
        module.fail_json(msg=str(exc))
    if params["only_kinds"]:
        files = [item for item in files if item["kind"] in params["only_kinds"]]
    secrets = secrets_of(state)
    changes, diffs, drifted = [], [], []
    for item in files:
        current = read_current(module, item["path"])
        if current == item["content"]:
            continue
        drifted.append(item)
        masked_before, masked_after = mask(current or "", secrets), mask(item["content"], secrets)
        changes.append(
            {
                "path": item["path"],
                "kind": item["kind"],
                "action": "update" if current is not None else "create",
                "restart": item["restart"],
                "diff": "".join(
                    difflib.unified_diff(
                        masked_before.splitlines(keepends=True),
                        masked_after.splitlines(keepends=True),
                        item["path"],
                        item["path"],
                    )
                ),
            }
        )
        diffs.append(
            {
                "before_header": item["path"],
                "after_header": item["path"],
                "before": masked_before,
                "after": masked_after,
            }
        )
    result = {"changed": bool(changes), "changes": changes, "restart_required": any(c["restart"] for c in changes)}
    if module._diff:
        result["diff"] = diffs
    if changes and not module.check_mode:
        if not params["backup_id"]:
            module.fail_json(msg="backup_id is required to write files (the previous versions are kept under it)")
        directory = backup_dir_of(module)
        take_backup(module, directory, drifted)
        for item in drifted:
            write_atomically(module, item["path"], item["content"])
        result["backup_dir"] = directory
    module.exit_json(**result)


if __name__ == "__main__":
    main()
