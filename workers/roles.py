"""The fleet's roles: one ``rtaudit.workers.<role>`` module each, started as ``faust -A rtaudit.workers.<role> worker``.

The single list that ``rtaudit up`` (:mod:`rtaudit.tools.fleet.local`), the CLI's role checks and the
deploy-file tests (``tests/unit/test_deploy_manifests.py``) read. A new role goes here and into the
deploy files.
"""

from __future__ import annotations

#: roles on the verdict path, in start order.
ROLES = ("router", "text", "image", "ocr", "audio", "video", "fusion")
#: roles `rtaudit up` adds when the settings enable them (:func:`rtaudit.tools.fleet.local.fleet_roles`); never on the verdict path.
OPTIONAL_ROLES = ("explain",)
