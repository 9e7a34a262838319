"""The YAML cargoship writes reads back as exactly the data it was given."""

from __future__ import annotations

import random
import string

import pytest
import yaml

from ansible_collections.cargoship.engine.plugins.module_utils._yaml_emit import dump

TRICKY_STRINGS = [
    "",
    " ",
    "yes",
    "No",
    "on",
    "OFF",
    "null",
    "~",
    "true",
    "1",
    "0x1F",
    "1e3",
    "1_000",
    "12:30",
    "2026-12-01",
    ".inf",
    "-",
    "*",
    "&a",
    "!tag",
    "#x",
    "a: b",
    "a #b",
    "- a",
    "[a]",
    "{a}",
    "'q'",
    '"q"',
    "back\\slash",
    "tab\there",
    "ünïcödé",
    "emoji 🚢",
    "line\nbreak",
    "trailing\n",
    "two trailing\n\n",
    " leading space\nx",
    "x\n  indented\ny",
    "ends with space \nx",
    "\u2028sep",
    "ctrl\x01",
    "https://registry.example:5000/v2",
    "docker.io",
    "registry-1.docker.io",
    "/var/lib/rancher/k3s/server/audit.yaml",
]


@pytest.mark.parametrize("text", TRICKY_STRINGS)
def test_strings_read_back_unchanged_as_values_keys_and_list_items(text):
    document = {text: text, "list": [text, {text: [text]}], "nested": {"a": {"b": text}}}
    assert yaml.safe_load(dump(document)) == document


def test_operator_style_layout_in_the_given_key_order():
    document = {
        "mirrors": {"docker.io": {"endpoint": ["https://mirror.example"]}, "*": {}},
        "configs": {"mirror.example": {"auth": {"username": "u"}, "tls": {"insecure_skip_verify": False}}},
    }
    assert dump(document, header="Managed by cargoship") == (
        "# Managed by cargoship\n"
        "mirrors:\n"
        "  docker.io:\n"
        "    endpoint:\n"
        '      - "https://mirror.example"\n'
        '  "*": {}\n'
        "configs:\n"
        "  mirror.example:\n"
        "    auth:\n"
        "      username: u\n"
        "    tls:\n"
        "      insecure_skip_verify: false\n"
    )


def test_lists_of_mappings_and_multi_line_text():
    document = {"rules": [{"level": "Metadata", "resources": [{"group": ""}]}], "text": "a: 1\nb: 2"}
    text = dump(document)
    assert 'rules:\n  - level: Metadata\n    resources:\n      - group: ""\n' in text
    assert "text: |-\n  a: 1\n  b: 2\n" in text
    assert yaml.safe_load(text) == document


def random_document(rng: random.Random, depth: int = 0) -> object:
    choice = rng.randrange(8 if depth < 3 else 4)
    alphabet = string.printable + "äß🚢\u2028"
    if choice == 0:
        return "".join(rng.choice(alphabet) for _index in range(rng.randrange(12)))
    if choice == 1:
        return rng.choice([True, False, None, 0, -7, 3.5, 1e20, rng.choice(TRICKY_STRINGS)])
    if choice == 2:
        return rng.randrange(-1000, 1000)
    if choice == 3:
        return rng.choice(TRICKY_STRINGS)
    if choice in (4, 5):
        return {
            "".join(rng.choice(alphabet) for _index in range(rng.randrange(1, 8))): random_document(rng, depth + 1)
            for _index in range(rng.randrange(4))
        }
    return [random_document(rng, depth + 1) for _index in range(rng.randrange(4))]


def test_random_documents_round_trip():
    rng = random.Random(20261201)
    for _index in range(3000):
        document = {"root": random_document(rng)}
        text = dump(document)
        assert yaml.safe_load(text) == document, text
