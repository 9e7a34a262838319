#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: local_kubeconfig
short_description: Merge a cluster's admin kubeconfig into a kubeconfig file
version_added: 0.1.0
description:
  - Takes the admin kubeconfig a k3s or RKE2 server writes, points it at O(server), and merges its
    cluster, user and context into O(path) under O(name), replacing entries of that name and leaving
    every other entry alone. The current context is set to O(name) only if the file had none.
  - Only what an entry needs to reach the API as admin is taken, which is the CA data of the cluster and
    the user's client certificate and key, token, or username and password; any other key is left out, with a
    warning. An admin kubeconfig with a credential plugin (C(exec), C(auth-provider)), a C(proxy-url) or
    C(insecure-skip-tls-verify) is refused, naming them, and the file is not touched, since whatever it holds
    would run as the operator once it is the current context.
  - Written atomically, mode 0600. Credentials are never returned; in the diff every user's credentials (token, password, client key and
    certificate, exec environment, auth-provider settings) are masked, and a changed one is marked so.
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
requirements:
  - PyYAML
options:
  path:
    description: The kubeconfig file to update; created if missing.
    type: path
    required: true
  admin_kubeconfig:
    description: Content of the server's admin kubeconfig.
    type: str
    required: true
  server:
    description: API address to use instead of the one in O(admin_kubeconfig), e.g. V(https://10.0.0.1:6443).
    type: str
    required: true
  name:
    description: Name of the cluster, user and context entries.
    type: str
    required: true
  keep_existing:
    description: Keep entries of that name that are already in the file instead of replacing them.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Merge the cluster into ~/.kube/config
  cargoship.engine.local_kubeconfig:
    path: ~/.kube/config
    admin_kubeconfig: "{{ admin_kubeconfig.content | b64decode }}"
    server: https://10.0.0.11:6443
    name: production
  delegate_to: localhost
"""

RETURN = r"""
changes:
  description: What was (or would be) done to the file.
  returned: always
  type: list
  elements: dict
"""

import difflib
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils import _credentials
from ansible_collections.cargoship.engine.plugins.module_utils._engine_files import sync_directory

try:
    import yaml

    HAS_YAML = True
except ImportError:
    HAS_YAML = False


def masked_texts(current: dict, wanted: dict) -> tuple[str, str]:
    """Before and after for the diff, every user's credentials masked (a changed one marked so)."""
    before, after = _credentials.masked_pair("kubeconfig", current or None, wanted)
    return (yaml.safe_dump(before, sort_keys=False) if before else ""), yaml.safe_dump(after, sort_keys=False)


def upsert(entries: list, name: str, key: str, value: dict) -> list:
    kept = [entry for entry in entries or [] if entry.get("name") != name]
    return [*kept, {"name": name, key: value}]


# What the entries taken from a server's admin kubeconfig may carry: enough to reach its API as admin.
# That file is written by root on one controller; whatever else it holds would run, or be trusted, as the
# operator (who holds the keys of the whole fleet) once it is their current context. So a credential
# plugin (exec, auth-provider), a proxy and a switched-off TLS check are refused, naming them, and any
# other key is left out.
CLUSTER_KEYS = ("certificate-authority-data",)
USER_KEYS = ("client-certificate-data", "client-key-data", "token", "username", "password")
REFUSED = {
    "cluster": {
        "proxy-url": "sends the operator's API traffic through a proxy of the host's choosing",
        "insecure-skip-tls-verify": "turns off the check of the API server's certificate",
    },
    "user": {
        "exec": "runs a command of the host's choosing as the operator",
        "auth-provider": "runs an authentication plugin of the host's choosing as the operator",
    },
}


def admin_entries(admin: dict) -> tuple[dict, dict, list[str], list[str]]:
    """The cluster and user entries to merge, taken from the admin kubeconfig by the allow-lists; what is
    refused in it (each with why) and what is left out."""
    source = {"cluster": admin["clusters"][0]["cluster"], "user": admin["users"][0]["user"]}
    refused, left_out = [], []
    for kind, entry in source.items():
        for key, value in entry.items():
            if key in REFUSED[kind] and value not in (None, False, ""):
                refused.append(f"{kind} {key} ({REFUSED[kind][key]})")
            elif key not in (CLUSTER_KEYS if kind == "cluster" else USER_KEYS) and key != "server":
                left_out.append(f"{kind} {key}")
    cluster = {key: source["cluster"][key] for key in CLUSTER_KEYS if isinstance(source["cluster"].get(key), str)}
    user = {key: source["user"][key] for key in USER_KEYS if isinstance(source["user"].get(key), str)}
    has_credential = (
        ("client-certificate-data" in user and "client-key-data" in user)
        or "token" in user
        or ("username" in user and "password" in user)
    )
    if not refused and not has_credential:
        refused.append("user: no client certificate and key, token, or username and password to reach the API with")
    if not refused and "certificate-authority-data" not in cluster:
        refused.append("cluster: no certificate-authority-data to verify the API server with")
    return cluster, user, refused, left_out


def merged(current: dict, cluster: dict, user: dict, server: str, name: str) -> dict:
    cluster = {"server": server, **cluster}
    result = dict(current) if current else {"apiVersion": "v1", "kind": "Config", "preferences": {}}
    result["clusters"] = upsert(result.get("clusters"), name, "cluster", cluster)
    result["users"] = upsert(result.get("users"), name, "user", user)
    result["contexts"] = upsert(result.get("contexts"), name, "context", {"cluster": name, "user": name})
    if not result.get("current-context"):
        result["current-context"] = name
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "admin_kubeconfig": {"type": "str", "required": True, "no_log": True},
            "server": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "keep_existing": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg="PyYAML is required on the control host")
    p = module.params
    try:
        admin = yaml.safe_load(p["admin_kubeconfig"])
        usable = isinstance(admin["clusters"][0]["cluster"], dict) and isinstance(admin["users"][0]["user"], dict)
    except (yaml.YAMLError, KeyError, IndexError, TypeError):
        usable = False
    if not usable:
        module.fail_json(msg="the admin kubeconfig from the server is not a usable kubeconfig")
    path = p["path"]
    if os.path.islink(path):
        module.fail_json(msg=f"refusing to write {path}: it is a symbolic link")
    current = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            try:
                current = yaml.safe_load(handle) or {}
            except yaml.YAMLError as exc:
                # Where, not what: the line may hold a credential.
                mark = getattr(exc, "problem_mark", None)
                where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
                module.fail_json(msg=f"{path} is not valid YAML{where}, not touching it")
    present = any(
        entry.get("name") == p["name"] for key in ("clusters", "users", "contexts") for entry in current.get(key) or []
    )
    if p["keep_existing"] and present:
        module.exit_json(changed=False, changes=[], msg=f"kept the existing entries named {p['name']} in {path}")
    cluster, user, refused, left_out = admin_entries(admin)
    if refused:
        module.fail_json(
            msg=f"not merging the admin kubeconfig of the server into {path}: it holds "
            + "; ".join(refused)
            + ". Look at that server's admin kubeconfig: k3s and RKE2 write none of these."
        )
    wanted = merged(current, cluster, user, p["server"], p["name"])
    if wanted == current:
        module.exit_json(changed=False, changes=[])
    masked_before, masked_after = masked_texts(current, wanted)
    changes = [
        {
            "path": path,
            "action": "update" if current else "create",
            "diff": "".join(
                difflib.unified_diff(masked_before.splitlines(True), masked_after.splitlines(True), path, path)
            ),
        }
    ]
    result = {"changed": True, "changes": changes}
    if left_out:
        module.warn(f"left out of {path}, as no admin kubeconfig entry needs them: {', '.join(left_out)}")
    if module._diff:
        result["diff"] = {"before": masked_before, "after": masked_after, "before_header": path, "after_header": path}
    if not module.check_mode:
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".kubeconfig-", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)  # mkstemp's 0600 and the operator's own, never the old file's
            yaml.safe_dump(wanted, handle, sort_keys=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        sync_directory(directory)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
