"""The demo corpus and run: real content the project makes itself or takes from installed packages.

* texts written for the demo (``tools/demo/texts.txt``): clean, offensive and evasively spelled;
* photos from scikit-image's bundled ``skimage/data`` (CC0 / public domain) — benign negatives;
* images with text rendered by Pillow's bundled font, for OCR (benign and offensive);
* a text + image request, and malformed input: not JSON, a schema violation, an
  undecodable image, a disallowed URI;
* a spoken clip (eSpeak NG speech shipped in ``workers/media``, an insult at about 6.6 s) and
  a short video rendered with PyAV (an insult on screen from 2 to 3 s), both answered with
  timestamps in their evidence (:mod:`rtaudit.tools.demo.clips`).
"""

from __future__ import annotations

import base64
import io
import statistics
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont
from rich.table import Table

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.messages import AuditRequest, Evidence, MediaItem, Verdict

PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "camera.png", "coins.png",
          "motorcycle_left.png", "horse.png")
OCR_DOCS = ("page.png",)
RENDERED = (
    ("benign", "Free shipping on all orders this week"),
    ("benign", "Meeting notes: budget review at 3pm"),
    ("offensive", "shut the fuck up you idiot"),
    ("offensive", "you stupid bitch"),
)
DEMO_TENANT = "demo"
#: demo budget: OCR of a page takes about a second on this CPU, so a burst of
#: images queues; 60 s keeps the demo about the models, not about expiry.
DEMO_SLO_MS = 60_000


@dataclass(frozen=True)
class DemoItem:
    """One demo input: ``label`` is what a moderator would expect, ``raw`` the bytes published."""

    request_id: str
    kind: str
    label: str
    raw: bytes
    created_at_ms: int
    expects_verdict: bool = True
    expects_dlq: bool = False


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def render_text_image(text: str, size_px: int = 36) -> bytes:
    """A white PNG with ``text`` in Pillow's bundled font at ``size_px`` pixels."""
    font = ImageFont.load_default(size=size_px)
    left, top, right, bottom = font.getbbox(text)
    img = Image.new("RGB", (int(right - left) + 60, int(bottom - top) + 60), "white")
    ImageDraw.Draw(img).text((30 - left, 30 - top), text, fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def skimage_file(name: str) -> bytes:
    """The bytes of scikit-image's bundled photo ``name`` (the ``demo`` extra).

    Raises:
        RuntimeError: scikit-image is not installed (``pip install 'rtaudit[demo]'``).
    """
    try:
        return resources.files("skimage").joinpath("data", name).read_bytes()
    except ModuleNotFoundError as exc:
        raise RuntimeError("the demo photos come from scikit-image: pip install 'rtaudit[demo]'") from exc


def demo_texts() -> list[tuple[str, str]]:
    lines = resources.files("rtaudit.tools.demo").joinpath("texts.txt").read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t", 1)) for line in lines if line and not line.startswith("#")]  # type: ignore[misc]  # every line has a tab (the demo file's format), so the tuple has 2 items


def build_corpus(run_id: str | None = None) -> list[DemoItem]:
    """Every demo input, each with a fresh request id."""
    run_id = run_id or uuid.uuid4().hex[:6]
    items: list[DemoItem] = []

    def add(kind: str, label: str, raw_request: AuditRequest | bytes, rid: str, verdict: bool = True) -> None:
        raw = raw_request if isinstance(raw_request, bytes) else raw_request.model_dump_json(exclude_none=True).encode()
        items.append(DemoItem(rid, kind, label, raw, now_ms(), expects_verdict=verdict, expects_dlq=kind == "malformed"))

    def req(rid: str, **kw: object) -> AuditRequest:
        return AuditRequest(request_id=rid, tenant_id=DEMO_TENANT, created_at_ms=now_ms(), slo_ms=DEMO_SLO_MS, **kw)

    for n, (label, text) in enumerate(demo_texts()):
        rid = f"demo-{run_id}-text-{n:02d}"
        add("text", label, req(rid, text=text), rid)
    for name in PHOTOS + OCR_DOCS:
        rid = f"demo-{run_id}-img-{Path(name).stem}"
        item = MediaItem(type="image", data_b64=_b64(skimage_file(name)), name=name)
        add("image", "benign", req(rid, media=[item]), rid)
    for n, (label, text) in enumerate(RENDERED):
        rid = f"demo-{run_id}-ocr-{n:02d}"
        item = MediaItem(type="image", data_b64=_b64(render_text_image(text)), name=f"rendered-{n}.png")
        add("ocr", label, req(rid, media=[item]), rid)
    from rtaudit.tools.demo.clips import encode_audio, encode_video, speech_with_insult, text_frame

    rid = f"demo-{run_id}-speech"
    speech, _ = speech_with_insult(lead_s=0.5, gap_s=1.0)
    item = MediaItem(type="audio", data_b64=_b64(encode_audio(speech, fmt="mp3", codec="libmp3lame")), name="call.mp3")
    add("audio", "offensive", req(rid, media=[item]), rid)
    rid = f"demo-{run_id}-video"
    video = encode_video(lambda t: text_frame("you stupid idiot" if 2.0 <= t < 3.0 else "Welcome back!"), seconds=5)
    add("video", "offensive", req(rid, media=[MediaItem(type="video", data_b64=_b64(video), name="clip.mp4")]), rid)
    rid = f"demo-{run_id}-mixed"
    add("text+image", "offensive", req(rid, text="look at this loser lol", media=[
        MediaItem(type="image", data_b64=_b64(render_text_image("what a dumb bitch")), name="meme.png")]), rid)
    # Malformed on purpose: each must reach audit.dlq; those whose request id is readable
    # also get a verdict (not JSON: the id is unreadable, so the DLQ record is all there is).
    rid = f"demo-{run_id}-bad-json"
    add("malformed", "dlq only", b'{"request_id": "' + rid.encode() + b'", "tenant_id": "demo", "text": "unterminated', rid, verdict=False)
    rid = f"demo-{run_id}-bad-schema"
    add("malformed", "rejected", f'{{"request_id": "{rid}", "tenant_id": "demo", "created_at_ms": {now_ms()}}}'.encode(), rid)
    rid = f"demo-{run_id}-bad-image"
    add("malformed", "error", req(rid, media=[MediaItem(type="image", data_b64=_b64(b"GIF89a not really an image"), name="broken.gif")]), rid)
    rid = f"demo-{run_id}-bad-uri"
    add("malformed", "rejected", req(rid, media=[MediaItem(type="image", uri="file:///etc/shadow")]), rid)
    return items


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation (``statistics.quantiles``, inclusive)."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[min(98, max(0, int(q) - 1))]


def evidence_summary(v: Verdict, width: int = 60) -> str:
    """A short human summary of a verdict's evidence (flagged words and boxes, else OCR text, else reasons)."""
    flagged = [e for e in v.evidence if e.category in v.flagged]
    if flagged:
        parts = [f"{e.category}:{e.text or e.label}({e.score:.2f}){_when(e)}" for e in flagged[:3]]
    else:
        ocr = [e.text for e in v.evidence if e.category == "ocr" and e.text]
        parts = [f'ocr:"{" / ".join(ocr)}"'] if ocr else [r for r in v.reasons[:1]]
    text = "; ".join(parts)
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(e: Evidence) -> str:
    """``@5.30-6.70s`` for evidence with a time in its media (``#12`` appended for a frame), else ``""``."""
    if e.time_s is None:
        return ""
    return f"@{e.time_s[0]:.2f}-{e.time_s[1]:.2f}s" + (f"#{e.frame}" if e.frame is not None else "")


def verdict_line(v: Verdict, arrived_ms: int | None = None) -> str:
    """One readable line: decision, id, completeness, top two categories (scores with 2
    decimals, never cut), evidence, latency in ms: ``arrived_ms - created_at_ms`` when
    ``arrived_ms`` is given, else the verdict's own ``latency_ms`` (decided - created)."""
    top = sorted(v.categories.items(), key=lambda kv: -kv[1])[:2]
    cats = ",".join(f"{c}={s:.2f}" for c, s in top) or "-"
    latency = (arrived_ms - v.created_at_ms) if arrived_ms is not None else v.latency_ms
    done = "complete" if v.complete else "PARTIAL "
    return f"{v.decision.upper():6} {v.request_id:34} {done} {cats:38} {evidence_summary(v)}  [{latency} ms]"


@dataclass(frozen=True)
class Summary:
    """What a run measured: decisions, end-to-end latency (ms, created_at → arrival) and throughput."""

    total: int
    expected_verdicts: int
    received: int
    expected_dlq: int
    dlq: int
    decisions: dict[str, int]
    incomplete: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    throughput_per_s: float


def summarize(items: list[DemoItem], got: dict[str, tuple[Verdict, int]], started_ms: int, dlq: int = 0) -> Summary:
    latencies = [float(arr - v.created_at_ms) for v, arr in got.values()]
    decisions: dict[str, int] = {}
    for v, _ in got.values():
        decisions[v.decision] = decisions.get(v.decision, 0) + 1
    last = max((arr for _, arr in got.values()), default=started_ms)
    span_s = max(1e-3, (last - started_ms) / 1000.0)
    return Summary(
        total=len(items), expected_verdicts=sum(i.expects_verdict for i in items), received=len(got),
        expected_dlq=sum(i.expects_dlq for i in items), dlq=dlq, decisions=decisions,
        incomplete=sum(1 for v, _ in got.values() if not v.complete),
        p50_ms=percentile(latencies, 50), p95_ms=percentile(latencies, 95), p99_ms=percentile(latencies, 99),
        throughput_per_s=len(got) / span_s,
    )


def summary_tables(items: list[DemoItem], got: dict[str, tuple[Verdict, int]], summary: Summary) -> list[Table]:
    """The demo's two result tables: overall figures, and decisions by input kind."""
    table = Table(
        "requests", "verdicts", "DLQ", "allow", "review", "block", "partial", "P50 ms", "P95 ms", "P99 ms", "verdicts/s",
        title="rtaudit demo summary (end-to-end latency: created_at -> verdict received)",
    )
    d = summary.decisions
    table.add_row(
        str(summary.total), f"{summary.received}/{summary.expected_verdicts}", f"{summary.dlq}/{summary.expected_dlq}",
        str(d.get("allow", 0)), str(d.get("review", 0)), str(d.get("block", 0)), str(summary.incomplete),
        f"{summary.p50_ms:.0f}", f"{summary.p95_ms:.0f}", f"{summary.p99_ms:.0f}", f"{summary.throughput_per_s:.1f}",
    )
    by_kind = Table("input kind", "expected", "allow", "review", "block", "no verdict", title="decisions by input kind")
    rows: dict[tuple[str, str], dict[str, int]] = {}
    for item in items:
        row = rows.setdefault((item.kind, item.label), {})
        dec = got[item.request_id][0].decision if item.request_id in got else "none"
        row[dec] = row.get(dec, 0) + 1
    for (kind, label), row in rows.items():
        by_kind.add_row(kind, label, *(str(row.get(k, 0)) for k in ("allow", "review", "block", "none")))
    return [table, by_kind]
