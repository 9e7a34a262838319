# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine configuration files compared with the desired state, written, restored or cleaned.

The logic of the engine_config module, here so that host_survey runs the same code in its one round."""

from __future__ import annotations

import difflib
import hashlib
import os

from ansible_collections.cargoship.engine.plugins.module_utils import _credentials
from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import (
    ABSENT,
    HEADER,
    VARIABLES,
    InputError,
    engine_paths,
    managed_files,
    named,
    removable_kinds,
    render,
    render_data,
    same_content,
    validate,
)
from ansible_collections.cargoship.engine.plugins.module_utils._engine_files import EngineFiles, FileError, mover_of
from ansible_collections.cargoship.engine.plugins.module_utils._engines import LOCK_PATH
from ansible_collections.cargoship.engine.plugins.module_utils._host_lock import touch_if_held
from ansible_collections.cargoship.engine.plugins.module_utils._node_window import RESTORED, WRITTEN
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import Failed


def file_failure(error: FileError) -> Failed:
    return Failed(error.msg, **({"path": error.path} if error.path else {}))


def read_current(module, path: str) -> str | None:
    try:
        return EngineFiles.read(path)
    except FileError as error:
        raise file_failure(error) from error


def paths_of(module) -> dict:
    try:
        return engine_paths(module.params["engine"], module.params["layout"])
    except InputError as exc:
        raise Failed(str(exc)) from exc


def files_of(module) -> EngineFiles:
    """The run's file backend: its backup directory (refused inside the manifests directory, where the
    engine would apply backups), the module's atomic move."""
    params = module.params
    root = params["backup_root"]
    manifests = paths_of(module)["manifests"]
    if os.path.realpath(root).startswith(os.path.realpath(manifests)):
        raise Failed(f"backup_root {root} is inside the manifests directory, where the engine would apply backups")
    if not params["backup_id"] or "/" in params["backup_id"] or params["backup_id"] in (".", ".."):
        raise Failed("backup_id must be a plain name")
    return EngineFiles(
        os.path.join(root, params["backup_id"]), params["backup_id"], module.check_mode, move=mover_of(module)
    )


def restore(module) -> dict:
    try:
        result = files_of(module).restore()
    except FileError as error:
        raise file_failure(error) from error
    if result["backup_found"] and not module.check_mode:
        result["node_state"] = RESTORED
    return result


def clean(module) -> dict:
    """Remove the temporary files a write leaves only when interrupted between create and rename."""
    paths = paths_of(module)
    # Its own directories, whole; the registries file's directory (the engine's, maybe /etc) at its top only.
    backend = EngineFiles("", "", module.check_mode)
    changes = backend.clean(list(paths["allowed_roots"]), [os.path.dirname(p) for p in paths["allowed_files"]])
    return dict(changed=bool(changes), changes=changes, restart_required=False)


def written_by_cargoship(module, item: dict) -> bool:
    """A file on the host that cargoship wrote: its own files by their names, the engine's registries.yaml
    only when it carries cargoship's header."""
    if not os.path.isfile(item["path"]):
        return False
    if item.get("marked"):
        return (read_current(module, item["path"]) or "").startswith(f"# {HEADER}")
    return True


def no_longer_wanted(module, state: dict, files: list[dict]) -> tuple[list[dict], list[str]]:
    """Files cargoship wrote that the desired state asks to remove (content None), and a note for each kind
    the inventory does not name at all while cargoship's file of it is on the host: that file is kept.
    Anything cargoship did not write is left alone."""
    params = module.params
    wanted = {item["path"] for item in files}
    removable = removable_kinds(state)
    found, kept = [], {}
    for item in managed_files(params["engine"], params["node_role"], params["with_charts"], params["layout"]):
        if item["path"] in wanted or not written_by_cargoship(module, item):
            continue
        if item["kind"] in removable:
            found.append({**item, "content": None})
        elif item["kind"] != "config" and not named(state, item["kind"]):
            kept.setdefault(item["kind"], []).append(item["path"])
    notes = [
        f"{kind.replace('_', ' ')}: not in this inventory; {', '.join(paths)} written by cargoship "
        f"{'is' if len(paths) == 1 else 'are'} kept (set {VARIABLES[kind]}: {ABSENT} to remove "
        f"{'it' if len(paths) == 1 else 'them'})"
        for kind, paths in kept.items()
    ]
    return found, notes


def current_dropin(module, path: str) -> dict | None:
    """The config drop-in on the host, read as data (None when absent or unreadable)."""
    text = read_current(module, path)
    if text is None:
        return None
    try:
        data = _credentials.parse(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


WITHHELD = "(the current content is not shown: it cannot be read as YAML or JSON, and it may hold credentials)\n"


def with_credentials(params: dict) -> dict:
    """The desired state from the module's arguments, with the credentials the action plugin took out back in."""
    values = params["credentials"]
    charts = params["chart_values"]
    if isinstance(charts, dict):
        charts = {
            name: {**settings, "values": _credentials.chart_values_back(settings["values"], values)}
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


def secret_paths_given(params: dict) -> list:
    """secret_paths as lists of keys: a text is split at its dots, a list is taken as it is."""
    return [
        [str(key) for key in entry] if isinstance(entry, list) else str(entry).split(".")
        for entry in params.get("secret_paths") or []
    ]


def masked_texts(item: dict, current: str | None, secret_paths: list = ()) -> tuple[str, str]:
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
        masked_before, masked_after = masked_chart_pair(
            before if isinstance(before, dict) else None, after, secret_paths
        )
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


def secret_paths_of(chart: object, secret_paths: list) -> list:
    """The paths inside one chart's values that the user marked secret (each path's first key is the chart
    name, or ``*`` for every chart)."""
    return [path[1:] for path in secret_paths if path and path[0] in (chart, "*")]


def masked_chart_pair(before: dict | None, after: dict | None, secret_paths: list = ()) -> tuple:
    """A HelmChartConfig keeps its values as text in spec.valuesContent: mask the values inside it. The
    text is always shown as the masked data written out again (its comments and layout dropped, on both
    sides alike): text that is not a mapping of values is withheld, since masking cannot find its secrets."""
    values_before, values_after = chart_values_of(before), chart_values_of(after)
    name = ((after or before or {}).get("metadata") or {}).get("name")
    masked_before, masked_after = _credentials.masked_pair(
        "chart_values",
        values_before if isinstance(values_before, dict) else None,
        values_after if isinstance(values_after, dict) else None,
        secret_paths_of(name, secret_paths),
    )

    def with_values(manifest: dict | None, original: object, shown: object) -> dict | None:
        if manifest is None or not isinstance(manifest.get("spec"), dict) or "valuesContent" not in manifest["spec"]:
            return manifest
        text = render_data(shown) if isinstance(original, dict) else ("" if original is None else WITHHELD)
        return {**manifest, "spec": {**manifest["spec"], "valuesContent": text}}

    return with_values(before, values_before, masked_before), with_values(after, values_after, masked_after)


# What AnsibleModule is given: the module's arguments and their rules.
MODULE_KWARGS = {
    "argument_spec": {
        # Taken by the action plugin (an answer of host_survey); the module never sees it.
        "survey": {"type": "dict"},
        # Also the action plugin's: the desired state taken from the host's cargoship_* variables.
        "from_inventory": {"type": "bool", "default": False},
        "engine": {"type": "str", "required": True, "choices": ["k3s", "rke2"]},
        "node_role": {"type": "str", "choices": ["server", "agent"]},
        # Not no_log as a whole, which would hide every mirror and endpoint from the diffs: the action
        # plugin has moved the credentials inside into the no-log `credentials`, placeholders left here.
        "registries": {"type": "raw", "no_log": False},
        "audit_policy": {"type": "raw"},
        "pod_security": {"type": "raw"},
        "audit_log": {"type": "dict"},
        "chart_values": {"type": "raw"},
        "with_charts": {"type": "bool", "default": False},
        "layout": {"type": "dict", "default": {}},
        "state": {"type": "str", "default": "present", "choices": ["present", "staged", "restored", "cleaned"]},
        "backup_id": {"type": "str"},
        "lock_run_id": {"type": "str"},
        "backup_root": {"type": "path", "default": "/var/lib/cargoship/backups"},
        "credentials": {"type": "list", "elements": "raw", "no_log": True, "default": []},
        # Paths to mask, not secrets themselves.
        "secret_paths": {"type": "list", "elements": "raw", "default": [], "no_log": False},
        "only_kinds": {
            "type": "list",
            "elements": "str",
            "choices": ["registries", "audit_policy", "pod_security", "config", "chart_values"],
        },
    },
    "required_if": [
        ("state", "restored", ["backup_id", "node_role"]),
        ("state", "staged", ["backup_id", "node_role"]),
        ("state", "present", ["node_role"]),
    ],
    "supports_check_mode": True,
}


# Kinds whose files may hold credentials (registry auth, chart secrets): their fingerprint never hashes a
# credential (see fingerprint_of).
CREDENTIAL_KINDS = ("registries", "chart_values")


def fingerprint_of(item: dict, current: str | None, secret_paths: list) -> str:
    """What a reviewed plan records of a managed file as it is now: ``absent``, or the sha256 of its content;
    for a file that may hold credentials, the sha256 of its content with every credential masked, with its size
    and modification time (so that a credential changed by hand shows too, though no hash of it is kept)."""
    if current is None:
        return "absent"
    if item["kind"] not in CREDENTIAL_KINDS:
        return "sha256:" + hashlib.sha256(current.encode()).hexdigest()
    shown, _after = masked_texts(item, current, secret_paths)
    try:
        status = os.stat(item["path"])
    except OSError as exc:
        raise Failed(f"cannot read {item['path']}: {exc.strerror}", path=item["path"]) from exc
    masked_hash = hashlib.sha256(shown.encode()).hexdigest()
    return f"masked-sha256:{masked_hash} size:{status.st_size} mtime:{status.st_mtime_ns}"


def run(module) -> dict:
    """The module's work: its result, or Failed."""
    params = module.params
    if params["state"] == "cleaned":
        return clean(module)
    if params["state"] == "restored":
        return restore(module)
    if params["lock_run_id"]:
        refused = touch_if_held(LOCK_PATH, params["lock_run_id"], module.check_mode)
        if refused:
            raise Failed(f"{refused}: nothing was written")
    try:
        state = with_credentials(params)
        # Called without its action plugin, the module would have credentials in its arguments: hide
        # at least every one of them in what it returns.
        charts = state["chart_values"] if isinstance(state["chart_values"], dict) else {}
        documents = [("registries", state["registries"])] + [
            ("chart_values", settings.get("values")) for settings in charts.values() if isinstance(settings, dict)
        ]
        for kind, document in documents:
            module.no_log_values.update(_credentials.secret_strings(document, kind))
        state = validate(state)
        dropin = current_dropin(module, paths_of(module)["config_dropin"]) if params["node_role"] == "server" else None
        files = render(state, params["node_role"], params["with_charts"], params["layout"], dropin)
    except (InputError, ValueError) as exc:
        raise Failed(str(exc)) from exc
    removed, kept = no_longer_wanted(module, state, files)
    files += removed
    if params["only_kinds"]:
        files = [item for item in files if item["kind"] in params["only_kinds"]]
    changes, diffs, drifted, fingerprint = [], [], [], {}
    for item in files:
        current = read_current(module, item["path"])
        fingerprint[item["path"]] = fingerprint_of(item, current, secret_paths_given(params))
        if item["content"] is None:
            if current is None:
                continue
            action = "remove"
        elif same_content(item["kind"], current, item["content"]):
            continue
        else:
            action = "update" if current is not None else "create"
        drifted.append(item)
        masked_before, masked_after = masked_texts(item, current, secret_paths_given(params))
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
    result = {
        "changed": bool(changes),
        "changes": changes,
        "restart_required": any(c["restart"] for c in changes),
        "kept": kept,
        "fingerprint": fingerprint,
    }
    if module.check_mode:
        # What state=cleaned would remove (a comparison's, which writes nothing; a write does not walk the tree again).
        result["leftovers"] = [item["path"] for item in clean(module)["changes"]]
    # One backend for the run's writes and the clean-up of what state=staged left.
    backend = files_of(module) if params["backup_id"] and not module.check_mode else None
    if module._diff:
        result["diff"] = diffs
    if changes and not module.check_mode:
        if not params["backup_id"]:
            raise Failed("backup_id is required to write files (the previous versions are kept under it)")
        backend = backend or files_of(module)
        result["backup_dir"] = backend.backup_dir
        try:
            if params["state"] == "staged":
                backend.stage(drifted, changes)
            else:
                backend.write(drifted)
        except FileError as error:
            raise file_failure(error) from error
    if params["state"] == "present" and params["backup_id"] and not module.check_mode:
        backend.remove_staged([item["path"] for item in files])
    if params["state"] == "present" and not module.check_mode:
        result["node_state"] = WRITTEN
    return result
