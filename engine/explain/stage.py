"""One explanation, from a held image task to its :class:`rtaudit.schemas.explain.Explanation`
record: decode the task's image (inline or by URI, under the media policy), Grad-CAM++ (or
Grad-CAM) of the open_nsfw torch copy, the bounded PNG and the peak box."""

from __future__ import annotations

import base64
import io
import logging
import time

from PIL import Image

from rtaudit.engine.explain.cam import CamExplainer
from rtaudit.engine.explain.classifier import TARGET_LAYER, OpenNSFW
from rtaudit.engine.explain.join import Job
from rtaudit.engine.media import MediaPolicy, load_image_bgr
from rtaudit.schemas.codec import decode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.explain import Explanation
from rtaudit.schemas.messages import ModalityTask

log = logging.getLogger(__name__)


class ExplainStage:
    """Heatmaps for jobs of :class:`rtaudit.engine.explain.join.ExplainJoin`.

    Args:
        media_policy: sizes, pixels, allowed URI roots and hosts (as the image stage's).
        method, target: as :class:`rtaudit.engine.explain.cam.CamExplainer`.
        heatmap_side_px, heatmap_max_bytes: bounds of the evidence PNG.
        box_threshold: as :meth:`rtaudit.engine.explain.cam.Heatmap.peak_box`.
        device: torch device of the copy (``"cpu"``, ``"cuda"``).
        threads: torch intra-op threads on CPU (0: torch's default, one per core). The process's
            whole torch: a role that shares cores with the serving workers keeps this low.

    Raises:
        ModuleNotFoundError: the ``explain`` extra is not installed.
    """

    def __init__(self, media_policy: MediaPolicy, *, method: str = "gradcam++", target: str = "nsfw",
                 heatmap_side_px: int = 64, heatmap_max_bytes: int = 8 * 1024, box_threshold: float = 0.5,
                 device: str = "cpu", threads: int = 0) -> None:
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.media_policy = media_policy
        self.served = OpenNSFW(prefer_gpu=False)
        self.explainer = CamExplainer(self.served.torch_copy(device), method)
        self.target = target
        self.heatmap_side_px = heatmap_side_px
        self.heatmap_max_bytes = heatmap_max_bytes
        self.box_threshold = box_threshold

    def _record(self, job: Job, now_ms: int, **fields: object) -> Explanation:
        return Explanation(
            request_id=job.request_id, part=job.part or "image:*",
            trigger=job.trigger, decision=job.decision,
            model=self.served.model, method=self.explainer.method, target=self.target, layer=TARGET_LAYER,
            box_threshold=self.box_threshold, produced_at_ms=now_ms, **fields,
        )

    def explain(self, job: Job, now_ms: int) -> Explanation:
        """The evidence record of ``job``. Never raises for bad input: a task that cannot be
        decoded or whose image cannot be read gives ``status="unavailable"`` with the reason;
        a failure of the model itself gives ``status="error"``."""
        if job.task is None:
            return self._record(job, now_ms, status="unavailable", error_code="not_held", error=job.reason)
        try:
            task = decode(job.task.raw, ModalityTask)
            bgr = load_image_bgr(task.media, self.media_policy)
        except AuditError as exc:
            return self._record(job, now_ms, status="unavailable", error_code=str(exc.code), error=exc.message[:2000])
        started = time.perf_counter()
        try:
            heat = self.explainer.explain(bgr[..., ::-1], self.target)
            png = heat.png(self.heatmap_side_px, self.heatmap_max_bytes)
        except (RuntimeError, ValueError) as exc:
            log.exception("explanation failed request_id=%s part=%s", job.request_id, job.part)
            return self._record(job, now_ms, tenant_id=task.tenant_id, status="error", error_code="explain_failed",
                                error=f"{type(exc).__name__}: {exc}"[:2000])
        size = Image.open(io.BytesIO(png)).size
        return self._record(
            job, now_ms, tenant_id=task.tenant_id, status="ok", score=round(heat.score, 6), image_size=heat.image_size,
            heatmap_png_b64=base64.b64encode(png).decode("ascii"), heatmap_size=size,
            peak_box=heat.peak_box(self.box_threshold), compute_ms=round((time.perf_counter() - started) * 1000.0, 3),
        )
