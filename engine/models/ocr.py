"""OCR stage: PP-OCRv4 (mobile det + rec, angle classifier) through RapidOCR on onnxruntime,
with the recognized transcript scored by the text model.

Source: ``rapidocr-onnxruntime`` 1.4 (RapidAI/RapidOCR), whose ONNX models ship in
the package. RapidOCR has no cross-image batching, so a micro-batch runs image by
image; on CPU one page takes about 0.5-1.5 s, which is why OCR has its own
consumer group and scales on its own.
"""

from __future__ import annotations

import math
from importlib import metadata

import numpy as np

from rtaudit.engine.frames import SamplingParams
from rtaudit.engine.media import FittedImage, MediaPolicy, fit_image
from rtaudit.engine.models import StageOutput
from rtaudit.engine.models.frameset import FrameSet, flatten, fold, load_image_or_frames
from rtaudit.engine.models.text import model_ref, stage_output
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.schemas.messages import Evidence, ModalityTask, ModelRef


class OCRStage:
    """The ``ocr`` stage: lines with boxes and confidences, transcript scored for text categories.

    Evidence: one ``category="ocr"`` item per recognized line (``text``, ``box`` in
    original-image pixels, ``score`` = recognition confidence), then the text model's word spans,
    whose offsets point into the transcript (lines joined with ``"\\n"``).
    ``intra_op_threads``: onnxruntime intra-op threads of RapidOCR's detection, angle and
    recognition sessions (0: onnxruntime's default). ``use_cuda``: the CUDA provider for all three.
    ``sampling``: how frames of an animated image are sampled (each sampled frame is read; evidence
    names its ``frame`` and ``time_s``).
    """

    stage = "ocr"
    #: recognition confidence below which a line is dropped (RapidOCR's default is 0.5;
    #: lower keeps large single glyphs that the mobile recognizer reads with less confidence).
    text_score = 0.3

    def __init__(self, media_policy: MediaPolicy, scorer: TextScorer, *, intra_op_threads: int = 0,
                 use_cuda: bool = False, sampling: SamplingParams = SamplingParams()) -> None:
        from rapidocr_onnxruntime import RapidOCR

        # RapidOCR reads -1 as "onnxruntime's default" (one thread per core); its ``*_use_cuda`` ask for
        # the CUDA provider (RapidOCR checks the build has it and falls back to CPU with its own warning)
        self._ocr = RapidOCR(intra_op_num_threads=intra_op_threads or -1, det_use_cuda=use_cuda,
                             cls_use_cuda=use_cuda, rec_use_cuda=use_cuda)
        self.media_policy, self.sampling = media_policy, sampling
        self.scorer = scorer
        text_model = model_ref(scorer)
        self.model = ModelRef(
            name=f"rapidocr-ppocrv4+{text_model.name}",
            version=f"{metadata.version('rapidocr-onnxruntime')}+{text_model.version}",
        )

    #: longest side, pixels, an image is scaled down to before OCR: text larger than this
    #: stays legible, and a huge image cannot hold the stage for minutes (measured: a
    #: 6300×6300 page took 110 s at full size on 2 cores).
    max_side_px = 2048
    #: widest longer/shorter side ratio OCR runs on; a thinner image is padded (white) to it.
    #: RapidOCR scales the *short* side up to 736 px before detection, so a 20×2000 strip
    #: became a 736×73600 detector input (39 s on 2 cores) and a 1×10000 strip, scaled to
    #: 0 px, raised ``ResizeImgError``. At 4:1 the detector input stays at most 736×2944,
    #: under a normal page's.
    max_aspect = 4.0
    #: shortest side, in fitted pixels (the image's own short side × the fitting scale), below
    #: which no line of text can be legible: such an image is read as no text without running
    #: the detector (a 1×100,000 strip, padded to 512×2048, cost the detector 3.5-6 s).
    min_text_side_px = 6
    #: RapidOCR's detector scales an image's *short* side up to this many pixels (its
    #: ``Det.limit_side_len``, ``limit_type: min``) before PP-OCRv4 detection.
    det_short_side_px = 736
    #: most pixels the detector's input may have after that upscaling: an image whose short side
    #: would reach :attr:`det_short_side_px` only beyond it is scaled less, to this area. It is a
    #: 736×1472 (2:1) input, so photos and pages up to 2:1 are read as RapidOCR's default reads
    #: them, while a banner is not blown up several times (a 3:2 budget, 736×1104, read nothing from
    #: RapidOCR's own 259×133 ``ch_doc_server.png``: its short side reached 645 px, not 736). Measured with 1
    #: thread on this CPU (2 shared cores, ``benchmarks/ocr_detector_budget.py``): a 95×658
    #: rendered line became a 736×2944 detector input and took 1.8-3.0 s, 0.3 s within the budget,
    #: with the same text read; the demo's 19 OCR images took 6.4 CPU s instead of 10.1. The cost:
    #: (measured with the 3:2 budget) scikit-image's ``page.png`` (191×384, 2:1) read 4 of its 5 lines instead of 5.
    det_max_pixels = 736 * 1472

    def prepare(self, task: ModalityTask) -> FittedImage | FrameSet:
        """Load and decode the task's image, scaled to :attr:`max_side_px` and padded to
        :attr:`max_aspect` (any shape from 1×1 up is read; tiny images are upscaled by RapidOCR);
        an animated image's sampled frames, each fitted so.

        Raises:
            AuditError: as :func:`rtaudit.engine.models.frameset.load_image_or_frames`.
        """
        return load_image_or_frames(task.media, self.media_policy, self.sampling, self.fit)

    def fit(self, bgr: np.ndarray) -> FittedImage:
        """``uint8[h, w, 3]`` BGR scaled to :attr:`max_side_px` and padded to :attr:`max_aspect`."""
        return fit_image(bgr, max_side_px=self.max_side_px, max_aspect=self.max_aspect)

    def recognize(self, bgr: np.ndarray) -> list[tuple[str, float, tuple[int, int, int, int]]]:
        """``(text, confidence, (x, y, w, h))`` per recognized line, top to bottom; boxes in ``bgr``'s pixels."""
        self._ocr.text_det.limit_side_len = self.detector_short_side(*bgr.shape[:2])
        result, _ = self._ocr(bgr, text_score=self.text_score)
        lines = []
        for quad, text, conf in result or []:
            xs = [p[0] for p in quad]
            ys = [p[1] for p in quad]
            box = (int(min(xs)), int(min(ys)), int(max(xs) - min(xs)), int(max(ys) - min(ys)))
            lines.append((str(text), float(conf), box))
        return lines

    def detector_short_side(self, height: int, width: int) -> int:
        """The short side, pixels, RapidOCR scales an image of ``height`` × ``width`` up to before
        detection: :attr:`det_short_side_px`, or less where that would exceed :attr:`det_max_pixels`
        (never below 32, the detector's stride; an image already at least that short side is not
        scaled). Set on RapidOCR's detector before each image (it reads ``limit_side_len`` per call)."""
        short = min(height, width)
        if short <= 0:
            return self.det_short_side_px
        fitted = int(short * math.sqrt(self.det_max_pixels / (height * width)))
        return max(32, min(self.det_short_side_px, fitted))

    def _lines(self, fitted: FittedImage) -> list[tuple[str, float, tuple[int, int, int, int]]] | BaseException:
        """The lines of one image with boxes in original-image pixels, or the exception it raised
        (RapidOCR has no cross-image batching, so one image's failure is its own)."""
        if fitted.bgr.size and min(fitted.original_size) * fitted.scale < self.min_text_side_px:
            return []
        try:
            return [(t, c, fitted.to_original(b)) for t, c, b in self.recognize(fitted.bgr)]
        except Exception as exc:
            return exc

    def infer(self, inputs: list[FittedImage | FrameSet]) -> list[StageOutput | BaseException]:
        """One output per item (every sampled frame of an animation read, transcripts scored in one
        text-model call), or the exception its recognition raised (it fails alone)."""
        flat, _ = flatten(inputs)
        return fold(inputs, self.read(flat))

    def read(self, inputs: list[FittedImage]) -> list[StageOutput | BaseException]:
        """One output per image, or the exception that image's recognition raised (it fails alone)."""
        all_lines = [self._lines(f) for f in inputs]
        read = [lines for lines in all_lines if not isinstance(lines, BaseException)]
        transcripts = ["\n".join(t for t, _, _ in lines) for lines in read]
        text_outputs = iter([stage_output(r) for r in self.scorer.score(transcripts)] if transcripts else [])
        outputs: list[StageOutput | BaseException] = []
        for lines in all_lines:
            if isinstance(lines, BaseException):
                outputs.append(lines)
                continue
            text_out = next(text_outputs)
            transcript = "\n".join(t for t, _, _ in lines)
            evidence = [
                Evidence(part="", category="ocr", label="ocr_line", score=round(min(max(c, 0.0), 1.0), 4), text=t, box=b)
                for t, c, b in lines
            ]
            scores = dict(text_out.scores) if transcript.strip() else {k: 0.0 for k in text_out.scores}
            outputs.append(StageOutput(scores=scores, evidence=evidence + text_out.evidence))
        return outputs
