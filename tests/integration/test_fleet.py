"""End to end through the real broker: requests in, exactly one verdict per request out.

Two corpora go through the same fleet:

* the **core** corpus, made by the project itself, so every guarantee runs on a bare clone:
  texts written below, scikit-image's bundled photos (installed with the package), images
  with text rendered at test time by Pillow, and malformed requests of each kind;
* the **evaluation** corpus, read from ``../shared/data`` (tests take ``data_dir`` and skip,
  counted in the summary, without it): every image under ``shared/data/images/`` (photos
  and OCR test pages) and 200 labeled Davidson et al. 2017 tweets.
"""

from __future__ import annotations

import base64
import csv
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from rtaudit.engine.clock import now_ms
from rtaudit.engine.media import MediaPolicy, load_image_bgr
from rtaudit.engine.models.ocr import OCRStage
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.schemas.messages import MAX_INLINE_MEDIA_BYTES, AuditRequest, MediaItem, Verdict
from rtaudit.workers.client import AuditClient, dlq_reader, verdict_reader
from rtaudit.tools.demo.corpus import render_text_image, skimage_file
from rtaudit.workers.settings import Settings

from .conftest import TENANT

pytestmark = pytest.mark.integration
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff"}

#: texts written for these tests: what a moderator would decide is plain.
CLEAN_TEXTS = (
    "Thanks for the quick reply, the parcel arrived this morning.",
    "Is the museum open on Sunday afternoons?",
    "Great match last night, what a comeback in the second half.",
    "Please send me the slides from the budget meeting.",
    "Scunthorpe is a town in Lincolnshire.",
)
OFFENSIVE_TEXTS = (
    "You are a fucking idiot.",
    "Shut up, you stupid bitch.",
    "What an asshole, go to hell.",
    "you are a f*cking id1ot",
    "this is sh1t, you m0ron",
)
#: photos in scikit-image's ``skimage/data`` (CC0 / public domain): benign, colour and grey, PNG and JPEG.
PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "camera.png", "coins.png", "rocket.jpg")
#: text rendered into an image at test time: (text, whether the verdict must flag it).
RENDERED = (
    ("Meeting notes: budget review at 3pm", False),
    ("shut the fuck up you idiot", True),
)


def image_request(data: bytes, name: str, rid: str) -> AuditRequest:
    item = MediaItem(type="image", data_b64=base64.b64encode(data).decode(), name=name)
    return AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=now_ms(), media=[item])


def davidson_rows(data_dir: Path, n: int = 200) -> list[tuple[str, int]]:
    """The first ``n`` rows of Davidson's labeled_data.csv: (tweet, class 0 hate / 1 offensive / 2 neither)."""
    with open(data_dir / "text" / "davidson" / "labeled_data.csv", newline="", encoding="utf-8") as f:
        rows = [(r["tweet"], int(r["class"])) for r in csv.DictReader(f)]
    return rows[:n]


def malformed_inputs(run: str) -> dict[str, tuple[bytes, bool]]:
    """request id → (raw bytes, whether a verdict must come back)."""
    def req(rid: str, **kw: object) -> bytes:
        return AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=now_ms(), **kw).model_dump_json().encode()  # type: ignore[arg-type]

    big = base64.b64encode(b"\0" * (MAX_INLINE_MEDIA_BYTES + 1024)).decode()
    return {
        f"{run}-not-json": (b"\x89PNG\r\n not json at all", False),
        f"{run}-truncated-json": (b'{"request_id": "' + f"{run}-truncated-json".encode() + b'", "tenant_id"', False),
        f"{run}-no-content": (f'{{"request_id": "{run}-no-content", "tenant_id": "{TENANT}", "created_at_ms": {now_ms()}}}'.encode(), True),
        f"{run}-wrong-type": (f'{{"request_id": "{run}-wrong-type", "tenant_id": "{TENANT}", "created_at_ms": "yesterday", "text": "hi"}}'.encode(), True),
        f"{run}-oversized": (
            f'{{"request_id": "{run}-oversized", "tenant_id": "{TENANT}", "created_at_ms": {now_ms()}, '
            f'"media": [{{"type": "image", "data_b64": "{big}"}}]}}'.encode(),
            True,
        ),
        f"{run}-undecodable": (req(f"{run}-undecodable", media=[MediaItem(type="image", data_b64=base64.b64encode(b"GIF89a garbage").decode())]), True),
        f"{run}-uri": (req(f"{run}-uri", media=[MediaItem(type="image", uri="file:///etc/passwd")]), True),
        f"{run}-http-uri": (req(f"{run}-http-uri", media=[MediaItem(type="image", uri="http://169.254.169.254/latest")]), True),
    }


def publish_and_collect(settings: Settings, requests: list[AuditRequest], raw: dict[str, tuple[bytes, bool]]) -> dict:  # type: ignore[type-arg]
    """Publish ``requests`` and the ``raw`` records (request id → (bytes, whether a verdict must
    come back)); wait for every verdict, re-read the whole verdict topic a little later (a
    duplicate verdict would show up there) and read the DLQ records of the raw ones."""
    verdicts, dlq = verdict_reader(settings), dlq_reader(settings)
    client = AuditClient(settings)
    for r in requests:
        client.submit(r)
    for rid, (data, _) in raw.items():
        client.submit_raw(rid.encode(), data)
    client.flush()

    expected = {r.request_id for r in requests} | {rid for rid, (_, v) in raw.items() if v}
    got = verdicts.wait_for(expected, timeout_s=600)
    verdicts.close()
    time.sleep(2)
    seen: Counter[str] = Counter()
    rereader = verdict_reader(settings)
    for v, _ in rereader.stream(timeout_s=5):
        seen[v.request_id] += 1
    rereader.close()
    dead = dlq.wait_for(set(raw), timeout_s=30) if raw else {}
    dlq.close()
    return dict(expected=expected, got=got, seen=seen, dlq=dead)


def assert_exactly_one_verdict_each(run: dict) -> None:  # type: ignore[type-arg]
    missing = run["expected"] - set(run["got"])
    assert not missing, f"{len(missing)} requests without a verdict, e.g. {sorted(missing)[:5]}"
    dupes = {rid: n for rid, n in run["seen"].items() if rid in run["expected"] and n > 1}
    assert not dupes, f"duplicate verdicts: {dupes}"
    assert all(run["seen"][rid] == 1 for rid in run["expected"])


def _ocr_lines(v: Verdict) -> list[str]:
    return [e.text or "" for e in v.evidence if e.category == "ocr"]


# ---------------------------------------------------------------- core: inputs the project makes itself


@pytest.fixture(scope="module")
def core_run(fleet):  # type: ignore[no-untyped-def]
    """Publish the core corpus once (written texts, bundled photos, rendered text, malformed input)."""
    _, settings = fleet
    run = f"core-{uuid.uuid4().hex[:8]}"
    texts = {f"{run}-txt-{i:02d}": (t, False) for i, t in enumerate(CLEAN_TEXTS)}
    texts |= {f"{run}-txt-{len(CLEAN_TEXTS) + i:02d}": (t, True) for i, t in enumerate(OFFENSIVE_TEXTS)}
    photos = {f"{run}-photo-{Path(name).stem}": name for name in PHOTOS}
    rendered = {f"{run}-ocr-{i}": (t, flag) for i, (t, flag) in enumerate(RENDERED)}
    bad = malformed_inputs(run)
    requests = [AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=now_ms(), text=t) for rid, (t, _) in texts.items()]
    requests += [image_request(skimage_file(name), name, rid) for rid, name in photos.items()]
    requests += [image_request(render_text_image(t), f"{rid}.png", rid) for rid, (t, _) in rendered.items()]
    out = publish_and_collect(settings, requests, bad)
    return dict(out, run=run, texts=texts, photos=photos, rendered=rendered, bad=bad)


def test_exactly_one_verdict_per_request(core_run) -> None:  # type: ignore[no-untyped-def]
    assert len(core_run["expected"]) == len(CLEAN_TEXTS) + len(OFFENSIVE_TEXTS) + len(PHOTOS) + len(RENDERED) + 6
    assert_exactly_one_verdict_each(core_run)


def test_written_texts_are_decided_as_a_moderator_would(core_run) -> None:  # type: ignore[no-untyped-def]
    for rid, (text, offensive) in core_run["texts"].items():
        v: Verdict = core_run["got"][rid][0]
        assert v.complete and v.parts == {"text/text:0": "ok"}, (text, v.reasons)
        if offensive:
            assert v.decision in ("review", "block") and "offensive" in v.flagged, (text, v.categories)
        else:
            assert v.decision == "allow", (text, v.categories, v.reasons)


def test_bundled_photos_are_allowed(core_run) -> None:  # type: ignore[no-untyped-def]
    for rid, name in core_run["photos"].items():
        v: Verdict = core_run["got"][rid][0]
        assert v.complete, (name, v.reasons)
        assert v.decision == "allow", (name, v.categories, v.reasons)
        assert v.parts == {"image/image:0": "ok", "ocr/image:0": "ok"}, (name, v.parts)


def test_rendered_text_is_read_and_scored(core_run) -> None:  # type: ignore[no-untyped-def]
    for rid, (text, offensive) in core_run["rendered"].items():
        v: Verdict = core_run["got"][rid][0]
        assert v.complete and v.parts == {"image/image:0": "ok", "ocr/image:0": "ok"}, (text, v.reasons)
        read = " ".join(" ".join(_ocr_lines(v)).split())
        assert read == text, (text, _ocr_lines(v))
        if offensive:
            assert v.decision in ("review", "block"), (text, v.categories)
        else:
            assert v.decision == "allow", (text, v.categories, v.reasons)


def test_malformed_inputs_reach_the_dlq_and_get_a_verdict(core_run) -> None:  # type: ignore[no-untyped-def]
    for rid, (_, wants_verdict) in core_run["bad"].items():
        assert rid in core_run["dlq"], f"{rid} not in audit.dlq"
        record = core_run["dlq"][rid][0]
        assert base64.b64decode(record.original_b64), rid
        assert record.error_code and record.error, rid
        if wants_verdict:
            v: Verdict = core_run["got"][rid][0]
            assert v.decision == "review" and not v.complete, (rid, v)
            assert any(record.error_code in r for r in v.reasons), (rid, v.reasons, record.error_code)
    codes = {rid.rsplit("-", 1)[-1]: core_run["dlq"][rid][0].error_code for rid in core_run["bad"]}
    assert codes["json"] == "invalid_json" and codes["content"] == "schema_violation"
    assert codes["oversized"] == "schema_violation" and codes["undecodable"] == "media_undecodable"
    assert codes["uri"] == "uri_not_allowed"


def test_fleet_keeps_running_after_bad_input(fleet, core_run) -> None:  # type: ignore[no-untyped-def]
    fl, settings = fleet
    assert not fl.exited()
    reader = verdict_reader(settings)
    client = AuditClient(settings)
    rid = f"{core_run['run']}-after"
    client.submit(AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=now_ms(), text="you absolute idiot"))
    client.flush()
    got = reader.wait_for({rid}, timeout_s=60)
    reader.close()
    assert got[rid][0].decision in ("review", "block") and "offensive" in got[rid][0].flagged


# ---------------------------------------------------------------- generated twin of the evaluation corpus

#: the twelve photos of ``../shared/data/images/photos``, which are scikit-image's own files: read here from its wheel.
ALL_PHOTOS = ("astronaut.png", "brick.png", "camera.png", "chelsea.png", "clock_motion.png", "coffee.png", "coins.png",
              "grass.png", "gravel.png", "hubble_deep_field.jpg", "retina.jpg", "rocket.jpg")
#: a page of printed text (the shared corpus has Tesseract's phototest.tif): rendered by the test.
PAGE_LINES = (
    "This page was printed to test the OCR stage.",
    "The quick brown dog jumped over the lazy fox.",
    "Meeting at 10:30 in room 204, bring the budget.",
    "Delivery expected on Friday 12 June 2026.",
)
CLEAN_TEMPLATES = (
    "Could you send me the {thing} before {when}?", "Thanks for the {thing}, it arrived {when}.",
    "The {thing} looks great, see you {when}.", "I left the {thing} on your desk {when}.",
    "Is the {thing} still available {when}?",
)
OFFENSIVE_TEMPLATES = (
    "You are a {adj} {noun}.", "Shut up, you {adj} {noun}.", "Nobody asked you, {adj} {noun}.",
    "Get lost, {noun}, you are so {adj2}.", "What a {adj} {noun} you are.",
)
THINGS = ("report", "parcel", "photos", "invoice", "slides", "keys", "recipe", "tickets")
WHENS = ("tomorrow", "this morning", "on Monday", "next week", "tonight", "after lunch")
ADJS = ("stupid", "fucking", "pathetic", "worthless", "dumb")
ADJ2S = ("stupid", "pathetic", "dumb", "useless")
NOUNS = ("idiot", "moron", "loser", "bitch", "asshole", "dickhead")


def generated_texts(n: int = 200, seed: int = 38) -> list[tuple[str, bool]]:
    """``n`` texts (half clean, half offensive; whether offensive) from the templates above, seeded."""
    import random

    rng = random.Random(seed)
    out = [(rng.choice(CLEAN_TEMPLATES).format(thing=rng.choice(THINGS), when=rng.choice(WHENS)), False) for _ in range(n // 2)]
    out += [(rng.choice(OFFENSIVE_TEMPLATES).format(adj=rng.choice(ADJS), adj2=rng.choice(ADJ2S), noun=rng.choice(NOUNS)), True)
            for _ in range(n - n // 2)]
    rng.shuffle(out)
    return out


def render_page(lines: tuple[str, ...], size_px: int = 28) -> bytes:
    """A white PNG page with ``lines`` in Pillow's bundled font, ``size_px`` pixels high."""
    import io

    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size_px)
    width = max(int(font.getlength(line)) for line in lines) + 80
    img = Image.new("RGB", (width, 60 + len(lines) * (size_px * 2)), "white")
    draw = ImageDraw.Draw(img)
    for k, line in enumerate(lines):
        draw.text((40, 30 + k * size_px * 2), line, fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def generated_run(fleet):  # type: ignore[no-untyped-def]
    """The evaluation corpus's shape, made here (runs on a bare clone): 200 texts from templates,
    the twelve photos from scikit-image's wheel and a rendered page, in one burst."""
    _, settings = fleet
    run = f"gen-{uuid.uuid4().hex[:8]}"
    photos = {f"{run}-img-{Path(n).stem}": n for n in ALL_PHOTOS}
    texts = {f"{run}-txt-{i:03d}": row for i, row in enumerate(generated_texts())}
    page = f"{run}-page"
    requests = [image_request(skimage_file(n), n, rid) for rid, n in photos.items()]
    requests.append(image_request(render_page(PAGE_LINES), "page.png", page))
    requests += [AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=now_ms(), text=t) for rid, (t, _) in texts.items()]
    out = publish_and_collect(settings, requests, {})
    return dict(out, run=run, photos=photos, texts=texts, page=page)


def test_exactly_one_verdict_per_request_on_the_generated_corpus(generated_run) -> None:  # type: ignore[no-untyped-def]
    assert len(generated_run["expected"]) == 200 + len(ALL_PHOTOS) + 1
    assert_exactly_one_verdict_each(generated_run)


def test_all_twelve_photos_are_allowed(generated_run) -> None:  # type: ignore[no-untyped-def]
    for rid, name in generated_run["photos"].items():
        v: Verdict = generated_run["got"][rid][0]
        assert v.complete, (name, v.reasons)
        assert v.decision == "allow", (name, v.categories, v.reasons)
        assert set(v.parts) == {"image/image:0", "ocr/image:0"}


def test_a_rendered_page_is_read_line_by_line(generated_run) -> None:  # type: ignore[no-untyped-def]
    v: Verdict = generated_run["got"][generated_run["page"]][0]
    assert v.complete and v.decision == "allow", (v.reasons, v.categories)
    read = " ".join(" ".join(_ocr_lines(v)).split()).lower()
    for line in PAGE_LINES:  # PP-OCR may drop a space at a wide word gap: compare without spaces
        assert line.lower().replace(" ", "") in read.replace(" ", ""), (line, _ocr_lines(v))


def test_generated_offensive_texts_are_flagged_and_clean_ones_allowed(generated_run) -> None:  # type: ignore[no-untyped-def]
    flagged: dict[bool, list[bool]] = {True: [], False: []}
    for rid, (text, offensive) in generated_run["texts"].items():
        v: Verdict = generated_run["got"][rid][0]
        assert v.complete and v.parts == {"text/text:0": "ok"}, (text, v.reasons)
        flagged[offensive].append(v.decision != "allow")
    assert len(flagged[True]) == len(flagged[False]) == 100
    assert sum(flagged[True]) >= 95 and sum(flagged[False]) <= 5, (sum(flagged[True]), sum(flagged[False]))


# ---------------------------------------------------------------- evaluation: ../shared/data


@pytest.fixture(scope="module")
def corpus_run(fleet, data_dir):  # type: ignore[no-untyped-def]
    """Publish the shared evaluation corpus once: every image and 200 Davidson tweets."""
    _, settings = fleet
    run = f"eval-{uuid.uuid4().hex[:8]}"
    images = sorted(p for p in (data_dir / "images").rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    image_ids = {f"{run}-img-{i:03d}": p for i, p in enumerate(images)}
    text_rows = {f"{run}-txt-{i:03d}": row for i, row in enumerate(davidson_rows(data_dir))}
    requests = [image_request(p.read_bytes(), p.name, rid) for rid, p in image_ids.items()]
    requests += [AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=now_ms(), text=t) for rid, (t, _) in text_rows.items()]
    out = publish_and_collect(settings, requests, {})
    return dict(out, run=run, images=image_ids, texts=text_rows)


def test_exactly_one_verdict_per_request_on_the_evaluation_corpus(corpus_run) -> None:  # type: ignore[no-untyped-def]
    assert_exactly_one_verdict_each(corpus_run)


def test_shared_photos_are_allowed(corpus_run) -> None:  # type: ignore[no-untyped-def]
    photos = {rid: p for rid, p in corpus_run["images"].items() if p.parent.name == "photos"}
    assert len(photos) == 12
    for rid, path in photos.items():
        v: Verdict = corpus_run["got"][rid][0]
        assert v.complete, (path.name, v.reasons)
        assert v.decision == "allow", (path.name, v.categories, v.reasons)
        assert set(v.parts) == {"image/image:0", "ocr/image:0"}


def test_ocr_text_is_in_the_evidence(corpus_run, data_dir) -> None:  # type: ignore[no-untyped-def]
    by_name = {p.name: corpus_run["got"][rid][0] for rid, p in corpus_run["images"].items()}
    phototest = " ".join(_ocr_lines(by_name["phototest.tif"]))
    assert "This is a lot of 12 point text to test the" in phototest
    assert "ocr code and see if it works on all types" in phototest
    # ch_doc_server.png shows 嫖娼; the packaged PP-OCRv4 *mobile* recognizer reads it
    # differently from the server model RapidOCR's own test uses, so compare with what
    # the same stage reads from the same file outside the fleet.
    stage = OCRStage(MediaPolicy(), TextScorer(prefer_gpu=False))
    path = data_dir / "images" / "ocr" / "rapidocr" / "ch_doc_server.png"
    direct = [t for t, _, _ in stage.recognize(load_image_bgr(MediaItem(type="image", data_b64=base64.b64encode(path.read_bytes()).decode()), MediaPolicy()))]
    assert direct, "OCR read nothing from ch_doc_server.png"
    assert sorted(_ocr_lines(by_name["ch_doc_server.png"])) == sorted(direct)
    assert any("\u4e00" <= ch <= "\u9fff" for line in direct for ch in line), direct


def test_davidson_offensive_rows_are_flagged_more_than_neither(corpus_run) -> None:  # type: ignore[no-untyped-def]
    flagged: dict[str, list[bool]] = {"abusive": [], "neither": []}
    for rid, (_, label) in corpus_run["texts"].items():
        v: Verdict = corpus_run["got"][rid][0]
        assert v.complete and v.parts == {"text/text:0": "ok"}, v.reasons
        flagged["neither" if label == 2 else "abusive"].append(v.decision != "allow")
    rate = {k: sum(v) / len(v) for k, v in flagged.items()}
    assert len(flagged["abusive"]) + len(flagged["neither"]) == 200
    assert rate["abusive"] >= 0.5 and rate["abusive"] >= rate["neither"] + 0.3, rate
