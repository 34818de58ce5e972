"""Copy the repository's ``rtaudit.toml`` into ``deploy/k8s/configmap.yaml`` (ConfigMap ``rtaudit-config``).

The cluster's settings file is the repository's, verbatim: ``tests/unit/test_deploy_settings.py``
fails when the two differ and names this command::

    python deploy/tools/sync_configmap.py          # rewrite the ConfigMap in place
    python deploy/tools/sync_configmap.py --check  # exit 1 when it is out of date

Only the ``rtaudit.toml: |`` block is rewritten; the rest of the file (comments included) is kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGMAP = REPO / "deploy" / "k8s" / "configmap.yaml"
KEY = "  rtaudit.toml: |"
INDENT = "    "


def rendered(configmap_text: str, toml_text: str) -> str:
    """``configmap_text`` with the block under :data:`KEY` replaced by ``toml_text`` indented 4 spaces.
    The block runs to the next line that is not blank and not indented at least 4 spaces.

    Raises:
        ValueError: the ConfigMap has no ``rtaudit.toml: |`` key.
    """
    lines = configmap_text.splitlines()
    try:
        start = lines.index(KEY) + 1
    except ValueError:
        raise ValueError(f"{CONFIGMAP}: no line {KEY!r}") from None
    end = start
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith(INDENT)):
        end += 1
    block = [INDENT + ln if ln.strip() else "" for ln in toml_text.splitlines()]
    return "\n".join([*lines[:start], *block, *lines[end:]]) + "\n"


def main(argv: list[str]) -> int:
    want = rendered(CONFIGMAP.read_text(), (REPO / "rtaudit.toml").read_text())
    if "--check" in argv:
        if CONFIGMAP.read_text() != want:
            print(f"{CONFIGMAP} differs from rtaudit.toml: run python deploy/tools/sync_configmap.py", file=sys.stderr)
            return 1
        return 0
    CONFIGMAP.write_text(want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
