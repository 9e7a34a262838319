"""The wheel carries the cargoship.engine collection inside the cargoship_runner package, so that
``pip install cargoship`` gives a command that works from any directory (``cargoship_runner/collection.py``
finds it there). Editable installs use the checkout itself."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# What Ansible needs of the collection at run time, and what its users read (README, LICENSE, docs).
COLLECTION_PARTS = ("galaxy.yml", "README.md", "LICENSE", "meta", "plugins", "roles", "playbooks", "docs")


class BuildPyWithCollection(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = (
            Path(self.build_lib) / "cargoship_runner" / "_collection" / "ansible_collections" / "cargoship" / "engine"
        )
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for part in COLLECTION_PARTS:
            source = HERE / part
            if source.is_dir():
                shutil.copytree(source, target / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(source, target / part)


setup(cmdclass={"build_py": BuildPyWithCollection})
