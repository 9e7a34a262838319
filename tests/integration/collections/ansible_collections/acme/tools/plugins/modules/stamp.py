# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: stamp
short_description: Write a line into a file (a test collection's module)
description:
  - Writes O(text) into O(path), for tests that check a hook used a module of another collection.
options:
  path:
    description: The file to write.
    type: path
    required: true
  text:
    description: Its content.
    type: str
    required: true
author:
  - cargoship developers
"""

EXAMPLES = r"""
- name: Leave a stamp
  acme.tools.stamp:
    path: /tmp/stamp
    text: hello
"""

RETURN = r"""
path:
  description: The file written.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True}, "text": {"type": "str", "required": True}},
        supports_check_mode=True,
    )
    path, text = module.params["path"], module.params["text"]
    current = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            current = handle.read()
    changed = current != text
    if changed and not module.check_mode:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    module.exit_json(changed=changed, path=path)


if __name__ == "__main__":
    main()
