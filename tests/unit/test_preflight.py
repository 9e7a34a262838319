"""The inventory check the command makes before Ansible reads the files."""

from __future__ import annotations

from cargoship_runner.preflight import malformed_yaml

HOSTS = "all:\n  children:\n    workers:\n      hosts:\n        w1: {}\n"


def inventory(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_malformed_vars_file_is_named_with_line_and_column_without_quoting_it(tmp_path):
    secret_line = "  password: [hunter2-c4n4ry\n"
    inv = inventory(tmp_path, {"hosts.yml": HOSTS, "group_vars/workers/registry.yml": "auth:\n" + secret_line})
    problems = malformed_yaml(inv)
    assert len(problems) == 1
    assert problems[0].startswith(f"{tmp_path}/group_vars/workers/registry.yml, line 3, column 1: malformed YAML")
    assert "hunter2" not in problems[0]


def test_valid_files_pass_including_ansible_tags_and_whole_file_vaults(tmp_path):
    inv = inventory(
        tmp_path,
        {
            "hosts.yml": HOSTS,
            "group_vars/all.yml": "token: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\nraw: !unsafe '{{ x }}'\n",
            "host_vars/w1": "cargoship_engine: k3s\n",
            "group_vars/secret.yml": "$ANSIBLE_VAULT;1.1;AES256\n61626364\n",
        },
    )
    assert malformed_yaml(inv) == []
    assert malformed_yaml(inv / "hosts.yml") == []


def test_the_inventory_file_itself_and_files_beside_a_file_inventory_are_checked(tmp_path):
    inv = inventory(tmp_path, {"hosts.yml": "all: [\n", "host_vars/w1.yaml": "a: b: c\n"})
    problems = malformed_yaml(inv / "hosts.yml")
    assert [p.split(",")[0] for p in problems] == [f"{tmp_path}/hosts.yml", f"{tmp_path}/host_vars/w1.yaml"]
