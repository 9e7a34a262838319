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
  - Removing is asked for, never inferred. A kind of configuration given as V(absent) has the file
    cargoship wrote of it removed (kept in the backup). A kind that is omitted is left as the host has it,
    and the module returns a note in RV(kept) where cargoship's file of it stays. Files cargoship never
    wrote are left alone.
  - With O(state=present), writes every drifted file atomically (temporary file in the same
    directory, then rename), mode 0600, owner root, after copying the previous version to a backup
    directory outside the engine's manifests directory.
  - With O(state=staged), takes that backup and writes every drifted file in full next to its
    destination under a hidden name, without touching anything the engine reads. A later
    O(state=present) with the same O(backup_id) then only renames the staged files into place, so
    that a full disk or a read-only directory fails at staging, before the engine is stopped.
  - With O(state=restored), puts back the files of an earlier backup, removing files that did not
    exist before it.
  - Credentials are never logged, returned or shown. The module's action plugin, on the control host, moves
    the registry C(auth) values out of O(registries), and each chart's values whole (whatever their keys, as
    one encoded text), out of O(chart_values) into O(credentials), which is no-log as a whole. Diffs mask
    credentials by their place in the files (the current content included), and mark a credential that
    changes as changed. In chart values that place is any value (text or number) under a key whose name
    says secret, key, token, password or certificate, in any case and separator style (C(secretKey),
    C(aws_secret_access_key), C(tls.key)), or under a path of O(secret_paths).
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._survey
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
      - Content of C(registries.yaml) (mirrors and configs), as a mapping.
      - V(absent) removes a C(registries.yaml) that cargoship wrote (its header says so); one it did not
        write is left alone. Omitted, the host's file is left as it is.
    type: raw
  audit_policy:
    description:
      - The audit Policy document, as a mapping.
      - V(absent) removes the file cargoship wrote and its kube-apiserver arguments. Omitted, both stay as they are.
    type: raw
  pod_security:
    description:
      - The AdmissionConfiguration document for pod-security admission, as a mapping.
      - V(absent) removes the file cargoship wrote and its kube-apiserver argument. Omitted, both stay as they are.
    type: raw
  audit_log:
    description:
      - Audit log retention, C(maxage) (days), C(maxbackup) (files) and C(maxsize) (MB), passed to
        kube-apiserver with the audit policy. On k3s, which sets none, unset keys take the k3s hardening
        guide's 30, 10 and 100; on RKE2, which sets them itself, only the keys given are passed.
    type: dict
  chart_values:
    description:
      - Chart name to C(namespace) and C(values), written as HelmChartConfig manifests. A chart given as
        V(absent), or no longer listed, has its manifest removed.
      - V(absent) as a whole removes every chart manifest cargoship wrote. Omitted, the manifests stay as they are.
    type: raw
  from_inventory:
    description:
      - Take the desired state from this host's inventory variables, as the input validation checked them.
        It sets O(engine), O(registries), O(audit_policy), O(pod_security), O(audit_log) and O(secret_paths) from
        C(cargoship_engine), C(cargoship_registries) and so on (a variable the inventory does not set is
        left out), and O(chart_values) from C(cargoship_chart_values) where O(with_charts) is set.
        Options given in the task win.
      - Done by the action plugin on the control host; the module never sees it.
    type: bool
    default: false
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
        manifests directory). When O(chart_values) is given, a C(cargoship-*.yaml) manifest of a chart no
        longer in it is removed.
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
  lock_run_id:
    description:
      - With O(state=present) or V(staged), go on only while the cargoship host lock
        (M(cargoship.engine.host_lock)) is held by this run id, checked (and refreshed) in the same call,
        before any file is read or written; otherwise fail, writing nothing.
    type: str
  backup_root:
    description: Where backups are kept. Must not be inside the manifests directory.
    type: path
    default: /var/lib/cargoship/backups
  secret_paths:
    description:
      - Paths into O(chart_values) whose values the diffs mask too. Each is the chart's name (or V(*) for every
        chart) and the keys below its C(values), as a text with dots (V(traefik.dashboard.note)) or a list of keys
        (for a key with a dot in it). C(*) stands for any one key or list item. Everything under a path is masked.
    type: list
    elements: raw
    default: []
  credentials:
    description:
      - The credential values taken out of O(registries) and the values of each chart of O(chart_values), which
        then hold numbered placeholders in their place. Set by this module's action plugin on the control host; not meant to
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

- name: Prepare the new files while the engine still runs (a full disk fails here), only under this run's lock
  cargoship.engine.engine_config:
    engine: k3s
    node_role: agent
    registries: "{{ cargoship_registries }}"
    state: staged
    backup_id: "{{ cargoship_run_id }}"
    lock_run_id: "{{ cargoship_run_id }}"
  become: true

- name: Remove the registries.yaml cargoship wrote (asked for explicitly)
  cargoship.engine.engine_config:
    engine: k3s
    node_role: agent
    registries: absent
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
kept:
  description:
    - One note per kind of configuration that was omitted while the file cargoship wrote of it is on the
      host, naming the file and the value that would remove it.
  returned: always
  type: list
  elements: str
fingerprint:
  description:
    - Each managed file compared (O(state=present) or V(staged)) mapped to what it is now, as a reviewed plan
      records it, V(absent), or V(sha256:<hex>) of its content; for a file that may hold credentials (the
      registries file, chart values) V(masked-sha256:<hex> size:<bytes> mtime:<ns>), the hash of its content with
      every credential masked, so that no hash of a credential is returned.
  returned: with O(state=present) or V(staged)
  type: dict
leftovers:
  description:
    - The temporary files an interrupted write left in the engine's directories, which O(state=cleaned) would
      remove.
  returned: in check mode, with O(state=present) or V(staged)
  type: list
  elements: str
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils._engine_config import MODULE_KWARGS, run
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import finish


def main() -> None:
    finish(AnsibleModule(**MODULE_KWARGS), run)


if __name__ == "__main__":
    main()
