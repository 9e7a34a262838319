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
    pod-security admission configuration, chart values) and compares them with the host by content
    (the data they hold, whatever their layout). Files are written as YAML under a header naming cargoship.
  - A file cargoship wrote that the desired state no longer has is removed (kept in the backup). Files it
    never wrote are left alone.
  - With O(state=present), writes every drifted file atomically (temporary file in the same
    directory, then rename), mode 0600, owner root, after copying the previous version to a backup
    directory outside the engine's manifests directory.
  - With O(state=staged), takes that backup and writes every drifted file in full next to its
    destination under a hidden name, without touching anything the engine reads. A later
    O(state=present) with the same O(backup_id) then only renames the staged files into place, so
    that a full disk or a read-only directory fails at staging, before the engine is stopped.
  - With O(state=restored), puts back the files of an earlier backup, removing files that did not
    exist before it.
  - Credentials (registry C(auth) values, chart values named like credentials) are never logged, returned or
    shown. The module's action plugin, on the control host, moves them out of O(registries) and
    O(chart_values) into O(credentials), which is no-log as a whole. Diffs mask them by their place in
    the files (the current content included), and mark a credential that changes as changed.
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
    description:
      - Content of C(registries.yaml) (mirrors and configs).
      - Omit to have none from cargoship. A C(registries.yaml) that cargoship wrote (its header says so) is
        removed; one it did not write is left alone.
    type: dict
  audit_policy:
    description: The audit Policy document. Omit to have none from cargoship (the file it wrote is removed).
    type: dict
  pod_security:
    description:
      - The AdmissionConfiguration document for pod-security admission.
      - Omit to have none from cargoship (the file it wrote is removed).
    type: dict
  audit_log:
    description:
      - Audit log retention, C(maxage) (days), C(maxbackup) (files) and C(maxsize) (MB), passed to
        kube-apiserver with the audit policy. On k3s, which sets none, unset keys take the k3s hardening
        guide's 30, 10 and 100; on RKE2, which sets them itself, only the keys given are passed.
    type: dict
  chart_values:
    description: Chart name to C(namespace) and C(values), written as HelmChartConfig manifests.
    type: dict
  layout:
    description:
      - Where the engine keeps its files on this host, as its settings say (M(cargoship.engine.engine_info)
        returns them as C(settings)). C(config_file) (its drop-ins go to C(<config_file>.d/)), C(data_dir)
        (audit policy, pod-security file and manifests under C(<data_dir>/server/)) and C(private_registry)
        (the registries file). Other keys are ignored; missing ones take the engine's defaults.
    type: dict
    default: {}
  with_charts:
    description:
      - Manage the chart value manifests on this node (every server, since each applies its own
        manifests directory). A C(cargoship-*.yaml) manifest of a chart no longer in O(chart_values) is removed.
    type: bool
    default: false
  state:
    description:
      - V(present) makes the files match; V(restored) puts back the backup O(backup_id).
      - V(staged) prepares V(present) (see the description); it changes no file the engine reads.
      - V(cleaned) removes temporary files that an interrupted write of this module left in the engine's directories.
    type: str
    default: present
    choices: [present, staged, restored, cleaned]
  backup_id:
    description:
      - Name of the backup taken before writing, or to restore. Required with O(state=restored) and O(state=staged).
    type: str
  backup_root:
    description: Where backups are kept. Must not be inside the manifests directory.
    type: path
    default: /var/lib/cargoship/backups
  credentials:
    description:
      - The credential values taken out of O(registries) and O(chart_values), which then hold numbered
        placeholders in their place. Set by this module's action plugin on the control host; not meant to
        be set by hand.
    type: list
    elements: raw
    default: []
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

- name: Prepare the new files while the engine still runs (a full disk fails here)
  cargoship.engine.engine_config:
    engine: k3s
    node_role: agent
    registries: "{{ cargoship_registries }}"
    state: staged
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
      description: V(create), V(update), V(remove) (a file cargoship wrote and no longer wants) or, when restoring, V(restore).
      type: str
    diff:
      description: Unified diff of the file's content, credentials masked.
      type: str
    staged:
      description: With O(state=staged), where the new content waits to be renamed into place.
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
backup_found:
  description: With O(state=restored), whether this run had kept any previous version (none means it wrote nothing).
  returned: with O(state=restored)
  type: bool
node_state:
  description:
    - What the node is like now, for the report and the command that follow a node's sync (V(written)
      with O(state=present), V(restored) with O(state=restored)).
  returned: with O(state=present) or O(state=restored), not in check mode
  type: str
"""

import difflib
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils import _credentials
from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import (
    HEADER,
    InputError,
    engine_paths,
    managed_files,
    render,
    render_data,
    same_content,
    validate,
)
from ansible_collections.cargoship.engine.plugins.module_utils._engine_files import EngineFiles, FileError


def fail(module: AnsibleModule, error: FileError) -> None:
    module.fail_json(msg=error.msg, **({"path": error.path} if error.path else {}))


def read_current(module: AnsibleModule, path: str) -> str | None:
    try:
        return EngineFiles.read(path)
    except FileError as error:
        fail(module, error)
    return None


def paths_of(module: AnsibleModule) -> dict:
    try:
        return engine_paths(module.params["engine"], module.params["layout"])
    except InputError as exc:
        module.fail_json(msg=str(exc))
    return {}


def files_of(module: AnsibleModule) -> EngineFiles:
    """The run's file backend: its backup directory (refused inside the manifests directory, where the
    engine would apply backups), the module's atomic move."""
    params = module.params
    root = params["backup_root"]
    manifests = paths_of(module)["manifests"]
    if os.path.realpath(root).startswith(os.path.realpath(manifests)):
        module.fail_json(
            msg=f"backup_root {root} is inside the manifests directory, where the engine would apply backups"
        )
    if not params["backup_id"] or "/" in params["backup_id"] or params["backup_id"] in (".", ".."):
        module.fail_json(msg="backup_id must be a plain name")
    return EngineFiles(
        os.path.join(root, params["backup_id"]), params["backup_id"], module.check_mode, move=module.atomic_move
    )


def restore(module: AnsibleModule) -> None:
    try:
        result = files_of(module).restore()
    except FileError as error:
        fail(module, error)
    if result["backup_found"] and not module.check_mode:
        result["node_state"] = "restored"
    module.exit_json(**result)


def clean(module: AnsibleModule) -> None:
    """Remove the temporary files a write leaves only when interrupted between create and rename."""
    paths = paths_of(module)
    # Its own directories, whole; the registries file's directory (the engine's, maybe /etc) at its top only.
    backend = EngineFiles("", "", module.check_mode)
    changes = backend.clean(list(paths["allowed_roots"]), [os.path.dirname(p) for p in paths["allowed_files"]])
    module.exit_json(changed=bool(changes), changes=changes, restart_required=False)


def no_longer_wanted(module: AnsibleModule, files: list[dict]) -> list[dict]:
    """Files cargoship wrote that the desired state no longer has, to be removed (content None): its own
    files by their names, registries.yaml only when it carries cargoship's header. Anything else a
    host has is left alone."""
    params = module.params
    wanted = {item["path"] for item in files}
    found = []
    for item in managed_files(params["engine"], params["node_role"], params["with_charts"], params["layout"]):
        if item["path"] in wanted or not os.path.isfile(item["path"]):
            continue
        if item.get("marked"):
            current = read_current(module, item["path"]) or ""
            if not current.startswith(f"# {HEADER}"):
                continue
        found.append({**item, "content": None})
    return found


WITHHELD = "(the current content is not shown: it cannot be read as YAML or JSON, and it may hold credentials)\n"


def with_credentials(params: dict) -> dict:
    """The desired state from the module's arguments, with the credentials the action plugin took out back in."""
    values = params["credentials"]
    charts = params["chart_values"]
    if isinstance(charts, dict):
        charts = {
            name: {**settings, "values": _credentials.reveal(settings["values"], "chart_values", values)}
            if isinstance(settings, dict) and "values" in settings
            else settings
            for name, settings in charts.items()
        }
    return {
        "engine": params["engine"],
        "registries": _credentials.reveal(params["registries"], "registries", values),
        "audit_policy": params["audit_policy"],
        "pod_security": params["pod_security"],
        "audit_log": params.get("audit_log"),
        "chart_values": charts,
    }


def masked_texts(item: dict, current: str | None) -> tuple[str, str]:
    """The current and the new content of a file as a diff shows them: both read as data, every credential
    masked by its place in the file, a changed one marked so, and both written out the same way, so that
    the diff shows changes of content. Current content that cannot be read is withheld."""
    after = _credentials.parse(item["content"]) if item["content"] is not None else None
    if current is None:
        before = None
    else:
        try:
            before = _credentials.parse(current)
        except ValueError:
            before = WITHHELD
    if item["kind"] == "registries":
        masked_before, masked_after = _credentials.masked_pair(
            "registries", before if isinstance(before, dict) else None, after
        )
    elif item["kind"] == "chart_values":
        masked_before, masked_after = masked_chart_pair(before if isinstance(before, dict) else None, after)
    else:
        masked_before, masked_after = before, after
    if before is None:
        before_text = ""
    elif before is WITHHELD:
        before_text = WITHHELD
    elif isinstance(before, dict) or item["kind"] not in ("registries", "chart_values"):
        before_text = render_data(masked_before)
    else:
        before_text = WITHHELD  # data of an unexpected shape: masking cannot tell where its credentials are
    return before_text, render_data(masked_after) if item["content"] is not None else ""


def chart_values_of(manifest: dict | None) -> object:
    content = ((manifest or {}).get("spec") or {}).get("valuesContent")
    if not isinstance(content, str):
        return None
    try:
        return _credentials.parse(content)
    except ValueError:
        return WITHHELD


def masked_chart_pair(before: dict | None, after: dict) -> tuple[dict | None, dict]:
    """A HelmChartConfig keeps its values as text in spec.valuesContent: mask the values inside it."""
    values_before, values_after = chart_values_of(before), chart_values_of(after)
    masked_before, masked_after = _credentials.masked_pair(
        "chart_values", values_before if values_before is not WITHHELD else None, values_after
    )

    def with_values(manifest: dict | None, original: object, shown: object) -> dict | None:
        if manifest is None or shown == original:
            return manifest
        text = WITHHELD if original is WITHHELD else render_data(shown)
        return {**manifest, "spec": {**manifest["spec"], "valuesContent": text}}

    return with_values(before, values_before, masked_before), with_values(after, values_after, masked_after)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "engine": {"type": "str", "required": True, "choices": ["k3s", "rke2"]},
            "node_role": {"type": "str", "choices": ["server", "agent"]},
            # Not no_log as a whole, which would hide every mirror and endpoint from the diffs: the action
            # plugin has moved the credentials inside into the no-log `credentials`, placeholders left here.
            "registries": {"type": "dict", "no_log": False},
            "audit_policy": {"type": "dict"},
            "pod_security": {"type": "dict"},
            "audit_log": {"type": "dict"},
            "chart_values": {"type": "dict"},
            "with_charts": {"type": "bool", "default": False},
            "layout": {"type": "dict", "default": {}},
            "state": {"type": "str", "default": "present", "choices": ["present", "staged", "restored", "cleaned"]},
            "backup_id": {"type": "str"},
            "backup_root": {"type": "path", "default": "/var/lib/cargoship/backups"},
            "credentials": {"type": "list", "elements": "raw", "no_log": True, "default": []},
            "only_kinds": {
                "type": "list",
                "elements": "str",
                "choices": ["registries", "audit_policy", "pod_security", "config", "chart_values"],
            },
        },
        required_if=[
            ("state", "restored", ["backup_id", "node_role"]),
            ("state", "staged", ["backup_id", "node_role"]),
            ("state", "present", ["node_role"]),
        ],
        supports_check_mode=True,
    )
    params = module.params
    if params["state"] == "cleaned":
        clean(module)
    if params["state"] == "restored":
        restore(module)
    try:
        state = with_credentials(params)
        # Called without its action plugin, the module would have credentials in its arguments: hide
        # at least every one of them in what it returns.
        for document, kind in ((state["registries"], "registries"), (state["chart_values"], "chart_values")):
            found: list = []
            _credentials.hide(document, kind, found)
            module.no_log_values.update(str(value) for value in found if value)
        state = validate(state)
        files = render(state, params["node_role"], params["with_charts"], params["layout"])
    except (InputError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    files += no_longer_wanted(module, files)
    if params["only_kinds"]:
        files = [item for item in files if item["kind"] in params["only_kinds"]]
    changes, diffs, drifted = [], [], []
    for item in files:
        current = read_current(module, item["path"])
        if item["content"] is None:
            if current is None:
                continue
            action = "remove"
        elif same_content(item["kind"], current, item["content"]):
            continue
        else:
            action = "update" if current is not None else "create"
        drifted.append(item)
        masked_before, masked_after = masked_texts(item, current)
        changes.append(
            {
                "path": item["path"],
                "kind": item["kind"],
                "action": action,
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
    # One backend for the run's writes and the clean-up of what state=staged left.
    backend = files_of(module) if params["backup_id"] and not module.check_mode else None
    if module._diff:
        result["diff"] = diffs
    if changes and not module.check_mode:
        if not params["backup_id"]:
            module.fail_json(msg="backup_id is required to write files (the previous versions are kept under it)")
        backend = backend or files_of(module)
        result["backup_dir"] = backend.backup_dir
        try:
            if params["state"] == "staged":
                backend.stage(drifted, changes)
            else:
                backend.write(drifted)
        except FileError as error:
            fail(module, error)
    if params["state"] == "present" and params["backup_id"] and not module.check_mode:
        backend.remove_staged([item["path"] for item in files])
    if params["state"] == "present" and not module.check_mode:
        result["node_state"] = "written"
    module.exit_json(**result)


if __name__ == "__main__":
    main()
