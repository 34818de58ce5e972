"""The load of ``rtaudit chaos``: text, drawn images and images of rendered words, built with Pillow."""

from __future__ import annotations

import base64
import io
import random
from rtaudit.tools.chaos.plan import TENANT
from rtaudit.tools.chaos.tally import Sent


def _png(img: object) -> str:
    buf = io.BytesIO()
    img.save(buf, format="PNG")  # type: ignore[attr-defined]  # PIL's Image.save on an ImageDraw-made image: the stub types the wrong base
    return base64.b64encode(buf.getvalue()).decode("ascii")


def drawn_images(seed: int, n: int = 8, side: int = 96) -> list[str]:
    """``n`` small pictures (shapes on a colour, ``side`` px square) as base64 PNG: the image
    stage scores them, OCR finds little text in them (about 0.3 s each on one core)."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        img = Image.new("RGB", (side, side), tuple(rng.randrange(256) for _ in range(3)))
        draw = ImageDraw.Draw(img)
        for _ in range(4):
            x, y = rng.randrange(side - 16), rng.randrange(side - 16)
            draw.ellipse((x, y, x + rng.randrange(8, 40), y + rng.randrange(8, 40)), fill=tuple(rng.randrange(256) for _ in range(3)))
        out.append(_png(img))
    return out


#: words rendered into the OCR images.
OCR_PHRASES = ("free money now", "meet me tonight", "buy cheap pills", "great photo", "you idiot", "hello there")


def rendered_images(size_px: int = 18) -> list[str]:
    """Short phrases rendered black on white with Pillow's bundled font, base64 PNG (OCR
    reads them: about 1 s each on one core)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size_px)
    out = []
    for phrase in OCR_PHRASES:
        left, top, right, bottom = font.getbbox(phrase)
        img = Image.new("RGB", (int(right - left) + 20, int(bottom - top) + 20), "white")
        ImageDraw.Draw(img).text((10 - left, 10 - top), phrase, fill="black", font=font)
        out.append(_png(img))
    return out


class RequestMaker:
    """Builds the load's requests: kind drawn with ``image_share`` and ``ocr_share`` (the rest
    text), texts from the demo corpus, images from :func:`drawn_images` / :func:`rendered_images`."""

    def __init__(self, run: str, seed: int, slo_ms: int, image_share: float, ocr_share: float) -> None:
        from rtaudit.tools.demo.corpus import demo_texts

        self.run, self.slo_ms = run, slo_ms
        self.image_share, self.ocr_share = image_share, ocr_share
        self.rng = random.Random(seed)
        self.texts = [t for _, t in demo_texts()] or ["hello"]
        self.drawn, self.rendered = drawn_images(seed), rendered_images()

    def kind(self) -> str:
        x = self.rng.random()
        return "ocr" if x < self.ocr_share else "image" if x < self.ocr_share + self.image_share else "text"

    def make(self, i: int, created_ms: int):
        from rtaudit.schemas.messages import AuditRequest, MediaItem

        kind = self.kind()
        rid = f"{self.run}-{i:06d}-{kind}"
        text: str | None = self.rng.choice(self.texts)
        media = []
        if kind == "image":
            text = text[:80]  # type: ignore[index]  # text is a str for image items (set above)
            media = [MediaItem(type="image", data_b64=self.rng.choice(self.drawn), name="drawn.png")]
        elif kind == "ocr":
            text = None
            media = [MediaItem(type="image", data_b64=self.rng.choice(self.rendered), name="words.png")]
        req = AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=created_ms, slo_ms=self.slo_ms, text=text, media=media)
        return Sent(rid, kind, created_ms), req
