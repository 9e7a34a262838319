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

import base64
import json
import re

MASK = "********"
CHANGED = f"{MASK} (changed)"
ADDED = f"{MASK} (new)"
# What stands in for a credential in a module argument; the number is its index in the no-log list.
PLACEHOLDER = re.compile(r"^\*{8} cargoship credential #([0-9]+)$")

REGISTRY_SECRET_KEYS = frozenset(("password", "auth", "identity_token", "identitytoken", "token"))
KUBECONFIG_SECRET_KEYS = frozenset(("token", "password", "client-key-data", "client-certificate-data"))
# Chart values are free-form, so their masking is broad: a key whose name says secret, key, token,
# password or certificate, in any case and separator style (secretKey, aws_secret_access_key, tls.key,
# TLS_CRT, htpasswd), masks every value under it. The words of a key: split at separators and at a
# lower-to-upper case change.
SECRET_WORDS = frozenset(
    (
        "secret", "secrets", "password", "passwords", "passwd", "pwd", "pass", "passphrase", "pin",
        "token", "tokens", "key", "keys", "credential", "credentials", "cred", "creds", "auth",
        "authorization", "bearer", "cookie", "cert", "certs", "certificate", "certificates", "crt", "pem",
        "pfx", "p12", "jks", "keystore", "truststore", "htpasswd", "dsn", "jwt", "salt", "signature",
    )
)  # fmt: skip
# The same words run together in one lower-case key (apikey, secretkey, dbpassword, authtoken).
SECRET_INSIDE = re.compile(r"secret|passw|passphrase|token|credential|htpasswd|(key|cert|crt|pem|pwd)$")
WORD_BREAK = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
# A chart's values travel to the host as one no-log argument, encoded: its leaves then never become
# Ansible's no-log values one by one (a "1" or an "nginx" would be masked in every output).
CHART_VALUES_PREFIX = "cargoship chart values "

Path = tuple
# The user-info of a URL (scheme://user:password@host), anywhere in a text, and of an endpoint without a
# scheme (user:password@host:port, which the engines read as https): shown as a mask wherever a URL is.
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/?#@\s]+)@")
BARE_USERINFO = re.compile(r"^(?P<scheme>)(?P<info>[^/?#@\s:]+:[^/?#@\s]*)@")


def without_userinfo(text: str, mask: str = MASK) -> str:
    """text with the user-info of every URL in it replaced by mask."""
    text = URL_USERINFO.sub(lambda m: f"{m['scheme']}{mask}@", text)
    return BARE_USERINFO.sub(lambda m: f"{mask}@", text)


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
    if kind == "chart_values":  # the values of one chart: any key on the way names a secret
        return any(names_secret(key) for key in path if isinstance(key, str))
    return False


def names_secret(key: str) -> bool:
    """Whether a chart values key names a secret (SECRET_WORDS), in any case and separator style."""
    words = [word.lower() for word in WORD_BREAK.split(key) if word]
    return any(word in SECRET_WORDS for word in words) or bool(SECRET_INSIDE.search("".join(words)))


def marked_secret(path: Path, marked: list) -> bool:
    """Whether ``path`` lies at or under one of the ``marked`` paths (lists of keys; ``*`` is any one key
    or list item), as the user marks chart values secret (cargoship_secret_paths)."""
    return any(
        len(path) >= len(mark) and all(mark[i] == "*" or str(mark[i]) == str(path[i]) for i in range(len(mark)))
        for mark in marked
    )


def maskable(value: object) -> bool:
    """What a diff masks at a credential's place: text and numbers (an integer PIN), never a flag."""
    return value is not None and not isinstance(value, bool)


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


def is_endpoint(kind: str, path: Path) -> bool:
    """A registry mirror's endpoint (mirrors.<registry>.endpoint[i]), which may carry user:password@."""
    return kind == "registries" and len(path) == 4 and path[0] == "mirrors" and path[2] == "endpoint"


def hide(document: object, kind: str, found: list) -> object:
    """A copy of document whose credentials are placeholders (an endpoint with user-info among them,
    whole); their values are appended to found."""

    def visit(path: Path, value: object) -> object:
        with_userinfo = is_endpoint(kind, path) and isinstance(value, str) and without_userinfo(value) != value
        if not is_secret_value(value) or not (is_credential(kind, path) or with_userinfo):
            return value
        found.append(value)
        return f"{MASK} cargoship credential #{len(found) - 1}"

    return _walk(document, (), visit)


def reveal(document: object, kind: str, values: list) -> object:
    """The document hide() took apart, with its credentials back in place."""

    def visit(path: Path, value: object) -> object:
        hidden_here = is_credential(kind, path) or is_endpoint(kind, path)
        match = PLACEHOLDER.match(value) if isinstance(value, str) and hidden_here else None
        if not match:
            return value
        index = int(match.group(1))
        if index >= len(values):
            raise ValueError(f"credential #{index} was not passed to the module")
        return values[index]

    return _walk(document, (), visit)


def masked(document: object, kind: str, reference: object = _MISSING, marked: list = ()) -> object:
    """A copy of document with each credential masked (and each value under a ``marked`` path). With a
    reference (the other side of a diff), a credential that differs from the reference's at the same place
    says so, without showing either."""

    def visit(path: Path, value: object) -> object:
        if not maskable(value) or not (is_credential(kind, path) or marked_secret(path, marked)):
            return userinfo_masked(path, value, reference)
        if reference is _MISSING:
            return MASK
        found, other = lookup(reference, path)
        if not found:
            return ADDED
        return MASK if other == value else CHANGED

    return _walk(document, (), visit)


def userinfo_masked(path: Path, value: object, reference: object = _MISSING) -> object:
    """A text value with the user-info of its URLs masked; where the reference (the other side of a diff)
    has the same text but for a different user-info, marked as changed."""
    if not isinstance(value, str):
        return value
    shown = without_userinfo(value)
    if shown == value or reference is _MISSING:
        return shown
    found, other = lookup(reference, path)
    if found and isinstance(other, str) and other != value and without_userinfo(other) == shown:
        return without_userinfo(value, CHANGED)
    return shown


def masked_pair(kind: str, before: object, after: object, marked: list = ()) -> tuple[object, object]:
    """Before and after for a diff: before masked plainly, after marked where a credential changed."""
    return masked(before, kind, marked=marked), masked(after, kind, before if before is not None else {}, marked)


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
        # A chart's values are free-form: whatever their keys, all of them travel out of the logged
        # arguments, encoded as one text (see CHART_VALUES_PREFIX).
        charts = {}
        for name, settings in args["chart_values"].items():
            if isinstance(settings, dict) and "values" in settings:
                found.append(CHART_VALUES_PREFIX + encoded(settings["values"]))
                settings = {**settings, "values": f"{MASK} cargoship credential #{len(found) - 1}"}  # noqa: PLW2901
            charts[name] = settings
        args["chart_values"] = charts
    args["credentials"] = found
    return args


def encoded(values: object) -> str:
    text = json.dumps(values, sort_keys=True, ensure_ascii=True, default=str)
    return base64.b64encode(text.encode()).decode()


def chart_values_back(values: object, credentials: list) -> object:
    """A chart's values as moved_out took them: decoded from their no-log credential."""
    match = PLACEHOLDER.match(values) if isinstance(values, str) else None
    if not match:
        return values
    index = int(match.group(1))
    if index >= len(credentials) or not str(credentials[index]).startswith(CHART_VALUES_PREFIX):
        raise ValueError(f"the values of credential #{index} were not passed to the module")
    return json.loads(base64.b64decode(str(credentials[index])[len(CHART_VALUES_PREFIX) :]))


def secret_strings(document: object, kind: str) -> list[str]:
    """The text values at credential places of document: what a module adds to its no-log values, so that
    they are masked wherever they appear in its output."""
    found: list = []
    hide(document, kind, found)
    return [str(value) for value in found if value]


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
