"""Explain role: Grad-CAM++ heatmaps for the image parts of ``review``/``block`` verdicts and
for on-demand requests, off the hot path (:mod:`rtaudit.workers.explain_loop`; the heatmaps:
:mod:`rtaudit.engine.explain`). Start: ``faust -A rtaudit.workers.explain worker``."""

from rtaudit.workers.app import make_app
from rtaudit.workers.explain_loop import GROUP_ID, ROLE, explain_loop
from rtaudit.workers.runtime.loop import run_in_faust

app, settings = make_app(ROLE, app_id=f"{GROUP_ID}-runtime")
run_in_faust(app, lambda: explain_loop(settings))
