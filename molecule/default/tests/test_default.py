"""After converge: the engine runs on the written configuration, files are 0600 root, no lock is left."""

import json


def test_registries_written_for_the_engine(host):
    registries = host.file("/etc/rancher/k3s/registries.yaml")
    assert registries.exists and registries.user == "root" and registries.mode == 0o600
    assert "registry.internal.example:5000" in registries.content_string


def test_engine_restarted_onto_the_new_files(host):
    loaded = json.loads(host.file("/var/lib/rancher/k3s/lab/loaded.json").content_string)
    assert "/etc/rancher/k3s/registries.yaml" in loaded["files"]
    service = "k3s" if host.backend.get_hostname() == "c1" else "k3s-agent"
    assert host.service(service).is_running


def test_no_lock_left_behind(host):
    assert not host.file("/var/lib/cargoship/lock.json").exists
