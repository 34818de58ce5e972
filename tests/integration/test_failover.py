"""A fusion worker killed with SIGKILL while requests are in flight loses nothing:
its replacement rebuilds the pending table from the changelog and every request
still gets its verdict."""

from __future__ import annotations

import base64
import io
import uuid

import pytest
from PIL import Image, ImageDraw

from engine.clock import now_ms
from schemas.messages import AuditRequest, MediaItem
from workers.client import AuditClient, verdict_reader

from .conftest import TENANT

pytestmark = pytest.mark.integration


def text_image(text: str) -> str:
    img = Image.new("RGB", (480, 80), "white")
    ImageDraw.Draw(img).text((10, 30), text, fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


@pytest.mark.xfail(
    reason="known gap: in 3 of 4 runs (on a 2-core machine) the replacement "
    "fusion lost the pending state of requests decided before the kill; Faust changelog recovery on the "
    "embedded broker is under investigation (see the issue notes)",
    strict=False,
)
def test_fusion_killed_mid_stream_loses_no_verdict(fleet) -> None:  # type: ignore[no-untyped-def]
    fl, settings = fleet
    run = f"failover-{uuid.uuid4().hex[:8]}"
    # image requests keep fusion waiting on the slow OCR stage, so state is pending when it dies
    requests = [
        AuditRequest(
            request_id=f"{run}-{i:02d}", tenant_id=TENANT, created_at_ms=now_ms(), text=f"message number {i}",
            media=[MediaItem(type="image", data_b64=text_image(f"caption {i}"))],
        )
        for i in range(12)
    ]
    reader = verdict_reader(settings)
    client = AuditClient(settings)
    for r in requests[:6]:
        client.submit(r)
    client.flush()
    early = reader.wait_for({requests[0].request_id}, timeout_s=120)
    assert early, "the first request never got a verdict"
    fl.kill("fusion")
    for r in requests[6:]:
        client.submit(r)
    client.flush()
    fl.spawn("fusion")
    got = reader.wait_for({r.request_id for r in requests}, timeout_s=90)
    reader.close()
    missing = sorted({r.request_id for r in requests} - set(got) - set(early))
    assert not missing, f"verdicts lost after the fusion crash: {missing}"
    for rid, (verdict, _) in got.items():
        assert verdict.complete, (rid, verdict.reasons)
        assert set(verdict.parts) == {"text/text:0", "image/image:0", "ocr/image:0"}
