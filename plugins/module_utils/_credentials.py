# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Credentials inside the documents cargoship writes: where they are, and keeping them out of sight.

Where a credential sits is decided by its place in the document's structure, never by searching text
for a known value: a value stored escaped (a quote, a backslash, non-ASCII), an old value being
replaced, or a value cargoship never saw (another user's kubeconfig entry) is found all the same.

- ``hide`` / ``reveal``: the controller takes the credentials out of a document before it becomes a
  module argument (module arguments are logged on the host), and the module puts them back from an
  argument that is no-log as a whole.
- ``masked_pair``: the before and after of a file with every credential replaced by a mask; a
  credential that changes still shows as a change, never as its value.
"""

from __future__ import annotations

import json
import re

MASK = "********"
CHANGED = f"{MASK} (changed)"
ADDED = f"{MASK} (new)"
# What stands in for a credential in a module argument; the number is its index in the no-log list.
PLACEHOLDER = re.compile(r"^\*{8} cargoship credential #([0-9]+)$")

REGISTRY_SECRET_KEYS = frozenset(("password", "auth", "identity_token", "identitytoken", "token"))
KUBECONFIG_SECRET_KEYS = frozenset(("token", "password", "client-key-data", "client-certificate-data"))
# Chart values are free-form: a key named like a credential is one.
CREDENTIAL_NAME = re.compile(
    r"(pass(word|wd|phrase)?|secret|token|credentials?|api[-_]?key|private[-_]?key|auth)$", re.IGNORECASE
)

Path = tuple


def is_credential(kind: str, path: Path) -> bool:
    """Whether the scalar at ``path`` of a document of ``kind`` is a credential."""
    keys = [str(part) for part in path]
    if kind == "registries":  # configs.<registry>.auth.<key>
        return len(keys) == 4 and keys[0] == "configs" and keys[2] == "auth" and keys[3] in REGISTRY_SECRET_KEYS
    if kind == "kubeconfig":  # users[<name>].user.…
        if len(keys) < 4 or keys[0] != "users" or keys[2] != "user":
            return False
        rest = keys[3:]
        return (
            (len(rest) == 1 and rest[0] in KUBECONFIG_SECRET_KEYS)
            or (rest[0] == "exec" and len(rest) >= 3 and rest[1] == "env" and rest[-1] == "value")
            or (rest[0] == "auth-provider" and len(rest) >= 3 and rest[1] == "config")
        )
    if kind == "chart_values":  # the values of one chart
        return bool(keys) and bool(CREDENTIAL_NAME.search(keys[-1]))
    return False


def is_secret_value(value: object) -> bool:
    """Credentials are text (a vaulted value is text too, once decrypted). A number or a flag under a key
    named like a credential (``basicAuth: true``) is a setting: hiding it would mask every "true" or "5"
    in Ansible's output, which replaces no-log values wherever they appear."""
    return value is not None and not isinstance(value, (bool, int, float))


def _key_of(index: int, item: object) -> object:
    """List items are addressed by their name where they have one (kubeconfig users), else by position,
    so that comparing two versions of a list pairs the same entries."""
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        return item["name"]
    return index


def _walk(document: object, path: Path, visit) -> object:
    """A copy of document with visit(path, value) applied to every scalar."""
    if isinstance(document, dict):
        return {key: _walk(value, (*path, key), visit) for key, value in document.items()}
    if isinstance(document, list):
        return [_walk(item, (*path, _key_of(index, item)), visit) for index, item in enumerate(document)]
    return visit(path, document)


def lookup(document: object, path: Path) -> tuple[bool, object]:
    """(found, value) at path, list items matched as _key_of addresses them."""
    for part in path:
        if isinstance(document, dict) and part in document:
            document = document[part]
        elif isinstance(document, list):
            document = next((item for index, item in enumerate(document) if _key_of(index, item) == part), _MISSING)
            if document is _MISSING:
                return False, None
        else:
            return False, None
    return True, document


_MISSING = object()


def hide(document: object, kind: str, found: list) -> object:
    """A copy of document whose credentials are placeholders; their values are appended to found."""

    def visit(path: Path, value: object) -> object:
        if not is_secret_value(value) or not is_credential(kind, path):
            return value
        found.append(value)
        return f"{MASK} cargoship credential #{len(found) - 1}"

    return _walk(document, (), visit)


def reveal(document: object, kind: str, values: list) -> object:
    """The document hide() took apart, with its credentials back in place."""

    def visit(path: Path, value: object) -> object:
        match = PLACEHOLDER.match(value) if isinstance(value, str) and is_credential(kind, path) else None
        if not match:
            return value
        index = int(match.group(1))
        if index >= len(values):
            raise ValueError(f"credential #{index} was not passed to the module")
        return values[index]

    return _walk(document, (), visit)


def masked(document: object, kind: str, reference: object = _MISSING) -> object:
    """A copy of document with each credential masked. With a reference (the other side of a diff), a
    credential that differs from the reference's at the same place says so, without showing either."""

    def visit(path: Path, value: object) -> object:
        if not is_secret_value(value) or not is_credential(kind, path):
            return value
        if reference is _MISSING:
            return MASK
        found, other = lookup(reference, path)
        if not found:
            return ADDED
        return MASK if other == value else CHANGED

    return _walk(document, (), visit)


def masked_pair(kind: str, before: object, after: object) -> tuple[object, object]:
    """Before and after for a diff: before masked plainly, after marked where a credential changed."""
    return masked(before, kind), masked(after, kind, before if before is not None else {})


def parse(text: str) -> object:
    """A file's content as data: JSON, else YAML where PyYAML is there. Raises ValueError if neither."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml
    except ImportError:
        raise ValueError("not JSON, and PyYAML is not installed to read it as YAML") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML ({exc.__class__.__name__})") from None


def moved_out(args: dict) -> dict:
    """engine_config's arguments with every credential of its documents moved into ``credentials``.

    A module logs its arguments on the host (journal, syslog) before it can mask anything, and only an
    argument marked no-log as a whole is kept out. The registries and chart values cannot be no-log as a
    whole (their mirrors and settings belong in the diffs), so the control host replaces each credential
    with a numbered placeholder and its value travels in the no-log ``credentials``.
    """
    found: list = []
    args = dict(args)
    if isinstance(args.get("registries"), dict):
        args["registries"] = hide(args["registries"], "registries", found)
    if isinstance(args.get("chart_values"), dict):
        args["chart_values"] = {
            name: {**settings, "values": hide(settings["values"], "chart_values", found)}
            if isinstance(settings, dict) and "values" in settings
            else settings
            for name, settings in args["chart_values"].items()
        }
    args["credentials"] = found
    return args


def calls_moved_out(calls: list) -> tuple[list, list]:
    """host_survey's calls with the credentials of each engine_config call moved out (``moved_out``),
    and those credentials, one list per call (empty for the other modules)."""
    moved, credentials = [], []
    for call in calls:
        if isinstance(call, dict) and call.get("module") == "engine_config":
            args = moved_out(call.get("args") or {})
            credentials.append(args.pop("credentials"))
            call = {**call, "args": args}  # noqa: PLW2901 - the call as the module gets it
        else:
            credentials.append([])
        moved.append(call)
    return moved, credentials
