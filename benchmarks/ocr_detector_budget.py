"""OCR time per image with RapidOCR's own detector scaling against the stage's pixel budget
(``OCRStage.det_max_pixels``), on the demo's images, in one run.

Usage: ``python benchmarks/ocr_detector_budget.py [--rounds 3] [--threads 1]``

Images: what ``rtaudit demo`` sends to OCR (scikit-image's photos and page, the four lines
rendered with Pillow's font, the demo video's sampled frames). For each image and round the
two settings alternate (``unbounded``: the short side always scaled up to 736 px, RapidOCR's
default; ``budget``: at most ``det_max_pixels`` detector pixels). Printed per image: the
detector input's short side, the median seconds of :meth:`OCRStage.recognize`, and whether the
recognized lines are the same; then the totals, wall-clock and CPU seconds of this process (on a
shared machine the CPU seconds are the demand, the wall-clock seconds include waiting for a core).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def demo_images() -> list[tuple[str, np.ndarray]]:
    """``(name, uint8[h, w, 3] RGB)`` of every image the demo gives OCR."""
    from rtaudit.engine.frames import SamplingParams, video_frames
    from rtaudit.tools.demo.corpus import OCR_DOCS, PHOTOS, RENDERED, render_text_image, skimage_file
    from rtaudit.tools.demo.clips import encode_video, text_frame

    def rgb(data: bytes) -> np.ndarray:
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))

    images = [(n, rgb(skimage_file(n))) for n in PHOTOS + OCR_DOCS]
    images += [(f"rendered: {t[:18]}", rgb(render_text_image(t))) for _, t in RENDERED]
    video = encode_video(lambda t: text_frame("you stupid idiot" if 2.0 <= t < 3.0 else "Welcome back!"), seconds=5)
    frames = video_frames(video, SamplingParams(1.0, 0.05, 24), max_duration_s=60).frames
    images += [(f"video frame {f.index}", f.rgb) for f in frames]
    return images


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (the fleet's on 2 cores: 1)")
    args = ap.parse_args()

    from rtaudit.engine.media import MediaPolicy
    from rtaudit.engine.models.ocr import OCRStage
    from rtaudit.engine.text.scoring import TextScorer

    stage = OCRStage(MediaPolicy(), TextScorer(prefer_gpu=False, intra_op_threads=args.threads),
                     intra_op_threads=args.threads)
    budget = stage.det_max_pixels
    settings = {"unbounded": 10**12, "budget": budget}
    images = [(name, stage.fit(rgb[:, :, ::-1].copy())) for name, rgb in demo_images()]
    stage.recognize(images[0][1].bgr)  # warm-up
    times: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    lines: dict[tuple[str, str], list[str]] = {}
    for _ in range(args.rounds):
        for name, fitted in images:
            for label, pixels in settings.items():
                stage.det_max_pixels = pixels
                t0, c0 = time.perf_counter(), time.process_time()
                found = stage.recognize(fitted.bgr)
                times.setdefault((name, label), []).append(time.perf_counter() - t0)
                cpu.setdefault((name, label), []).append(time.process_time() - c0)
                lines[(name, label)] = [t for t, _, _ in found]
    stage.det_max_pixels = budget

    table = Table("image", "fitted h×w", "short side: unbounded → budget", "s unbounded", "s budget", "same lines",
                  "lines (budget)", title=f"OCR per image, median of {args.rounds} rounds, {args.threads} thread(s), "
                                          f"budget {budget} detector pixels")
    total = {label: 0.0 for label in settings}
    total_cpu = {label: 0.0 for label in settings}
    for name, fitted in images:
        h, w = fitted.bgr.shape[:2]
        med = {label: statistics.median(times[(name, label)]) for label in settings}
        for label in settings:
            total[label] += med[label]
            total_cpu[label] += statistics.median(cpu[(name, label)])
        stage.det_max_pixels = 10**12
        short_unbounded = stage.detector_short_side(h, w)
        stage.det_max_pixels = budget
        same = lines[(name, "unbounded")] == lines[(name, "budget")]
        table.add_row(name, f"{h}×{w}", f"{max(short_unbounded, min(h, w))} → {max(stage.detector_short_side(h, w), min(h, w))}",
                      f"{med['unbounded']:.2f}", f"{med['budget']:.2f}", "yes" if same else "NO",
                      " / ".join(lines[(name, "budget")])[:60])
    table.add_row("all images: wall s", "", "", f"{total['unbounded']:.2f}", f"{total['budget']:.2f}", "", "")
    table.add_row("all images: CPU s (process)", "", "", f"{total_cpu['unbounded']:.2f}", f"{total_cpu['budget']:.2f}", "", "")
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
