import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lab"))
# The collection's own code, imported the way Ansible imports it.
sys.path.insert(0, str(REPO / ".collections"))
