# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Block-style YAML as an operator writes it, without PyYAML (which a managed host may lack).

Keys keep the order they are given in; scalars are plain where no YAML parser (1.1 or 1.2) could
read them as anything but the same string, double-quoted otherwise; multi-line text is a literal
block. Every output reads back, with any YAML parser, as exactly the data given.
"""

from __future__ import annotations

import json
import math
import re

# Words YAML 1.1 parsers (PyYAML, the Go yaml.v2 the engines embed) read as booleans or null.
_SPECIAL = {"y", "n", "yes", "no", "true", "false", "on", "off", "null", "~", ""}
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./@-]*")
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff]")


def _quoted(text: str) -> str:
    # A JSON string is a YAML double-quoted scalar; the two Unicode line separators are escaped as well.
    return json.dumps(text, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        mantissa, _e, exponent = text.partition("e")
        # YAML 1.1 reads 1e+20 as a string: the mantissa needs a dot.
        return f"{mantissa}.0e{exponent}" if exponent and "." not in mantissa else text
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _SPECIAL:
        return text
    return _quoted(text)


def _literal(text: str, indent: str) -> str | None:
    """A multi-line string as a literal block, where one can hold it exactly."""
    if "\n" not in text or _UNPRINTABLE.search(text) or "\r" in text or "\t" in text:
        return None
    body = text[:-1] if text.endswith("\n") else text
    if not body or body.startswith((" ", "\n")) or body.endswith("\n") or body.endswith(" "):
        return None
    chomp = "" if text.endswith("\n") else "-"
    lines = [f"{indent}{line}" if line else "" for line in body.split("\n")]
    return f"|{chomp}\n" + "\n".join(lines)


def _value(value: object, indent: str) -> str:
    """The text after 'key:' or '- ': an inline scalar (with its leading space) or a nested block."""
    if isinstance(value, dict) and value:
        return "\n" + _block(value, indent)
    if isinstance(value, list) and value:
        return "\n" + _block(value, indent)
    if isinstance(value, dict):
        return " {}"
    if isinstance(value, list):
        return " []"
    if isinstance(value, str):
        block = _literal(value, indent)
        if block is not None:
            return " " + block
    return " " + _scalar(value)


def _block(node: object, indent: str) -> str:
    lines = []
    if isinstance(node, dict):
        for key, value in node.items():
            lines.append(f"{indent}{_scalar(str(key))}:{_value(value, indent + '  ')}")
    else:
        for item in node:  # type: ignore[union-attr]
            if isinstance(item, dict) and item:
                # The first key shares the dash's line; the others line up under it.
                nested = _block(item, indent + "  ")
                lines.append(f"{indent}- {nested[len(indent) + 2 :]}")
            else:
                lines.append(f"{indent}-{_value(item, indent + '  ')}")
    return "\n".join(lines)


def dump(document: object, header: str = "") -> str:
    """The document as YAML text ending in a newline, after ``header`` (comment lines, '# ' added)."""
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    if isinstance(document, (dict, list)) and document:
        return comment + _block(document, "") + "\n"
    return comment + _value(document, "").lstrip(" ") + "\n"
