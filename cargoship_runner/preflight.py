"""Checks of the user's inventory files made before Ansible reads them.

Ansible 2.19 reports a malformed variables file as "YAML parsing failed: ..." without naming the
file, and only once a play has started. Parsing the files here first names the file, line and
column. Messages never quote the file's content: the broken line may hold a credential.
"""

from __future__ import annotations

from pathlib import Path

import yaml

VAR_DIRS = ("group_vars", "host_vars")
YAML_SUFFIXES = {"", ".yml", ".yaml", ".json"}


class TolerantLoader(yaml.SafeLoader):
    """A safe loader that accepts Ansible's own tags (!vault, !unsafe) as opaque values."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node):
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)


TolerantLoader.add_multi_constructor("!", _any_tag)


def var_files(inventory: Path) -> list[Path]:
    """The inventory file(s) and the group_vars/host_vars files beside them that Ansible would load."""
    base = inventory if inventory.is_dir() else inventory.parent
    files = []
    if inventory.is_dir():
        files += sorted(p for p in inventory.iterdir() if p.is_file() and p.suffix in (".yml", ".yaml"))
    elif inventory.suffix in (".yml", ".yaml"):
        files.append(inventory)
    for name in VAR_DIRS:
        directory = base / name
        if directory.is_dir():
            files += sorted(
                p
                for p in directory.rglob("*")
                if p.is_file() and p.suffix in YAML_SUFFIXES and not p.name.startswith(".")
            )
    return files


def malformed_yaml(inventory: Path) -> list[str]:
    """One message per inventory file that is not valid YAML: file, line, column and the problem."""
    problems = []
    for path in var_files(inventory):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: cannot be read: {exc}")
            continue
        if text.startswith("$ANSIBLE_VAULT;"):
            continue  # encrypted as a whole: Ansible decrypts it, then parses it
        try:
            yaml.load(text, Loader=TolerantLoader)  # a SafeLoader that accepts Ansible tags
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problems.append(f"{path}{where}: malformed YAML: {exc.problem or exc.context}")
        except yaml.YAMLError as exc:
            problems.append(f"{path}: malformed YAML: {type(exc).__name__}")
    return problems
