# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What cargoship knows of each engine, in one place: its systemd units, where it keeps its files by
default, the prefix of its environment variables. engine_info returns what applies to a host
(``service``, and its settings as the host's engine reads them); roles use those, never a copy.

Sources: the k3s and RKE2 install scripts and docs (unit names, /etc/rancher/<engine>/config.yaml,
/var/lib/rancher/<engine>, registries.yaml, <ENGINE>_CONFIG_FILE); see shared/notes/real-engines.md.
Runs on the managed hosts: Python 3.8 compatible.
"""

from __future__ import annotations

# The operating systems k3s and RKE2 are supported on (os-release ID), as their docs list them.
SUPPORTED_OS = ("debian", "ubuntu", "rhel", "rocky", "almalinux", "centos", "sles", "opensuse-leap", "fedora")

ENGINES = {
    "k3s": {
        "services": {"server": "k3s", "agent": "k3s-agent"},
        "config_file": "/etc/rancher/k3s/config.yaml",
        "data_dir": "/var/lib/rancher/k3s",
        "private_registry": "/etc/rancher/k3s/registries.yaml",
        "admin_kubeconfig": "/etc/rancher/k3s/k3s.yaml",
        "env_prefix": "K3S_",
    },
    "rke2": {
        "services": {"server": "rke2-server", "agent": "rke2-agent"},
        "config_file": "/etc/rancher/rke2/config.yaml",
        "data_dir": "/var/lib/rancher/rke2",
        "private_registry": "/etc/rancher/rke2/registries.yaml",
        "admin_kubeconfig": "/etc/rancher/rke2/rke2.yaml",
        "env_prefix": "RKE2_",
    },
}

# The cargoship lock on each host (host_lock, lock_heartbeat).
LOCK_PATH = "/var/lib/cargoship/lock.json"


def service_name(engine: str, node_role: str) -> str:
    """The engine's unit for a node role (server or agent)."""
    return ENGINES[engine]["services"][node_role]


def services(engine: str) -> tuple:
    """Every unit of the engine, server first."""
    return tuple(ENGINES[engine]["services"].values())
