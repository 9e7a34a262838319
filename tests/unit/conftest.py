import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lab"))
# The collection's own code, imported the way Ansible imports it.
sys.path.insert(0, str(REPO / ".collections"))
sys.path.insert(0, str(REPO / "tests" / "unit"))
# The lab tests' helpers (running the command as a user does) serve the host-free tests too.
sys.path.insert(1, str(REPO / "tests" / "integration"))

import pytest  # noqa: E402


@pytest.fixture
def kube(tmp_path):
    """The lab's Kubernetes API double, served for one test (kube_api.KubeApi)."""
    from kube_api import KubeApi

    served = KubeApi(tmp_path)
    try:
        yield served
    finally:
        served.close()
