"""Audio real-time factor and video frames per second of one worker's stage, next to each model's raw
limit, measured in one run on this CPU (issue 36, "Bench").

Usage: ``python benchmarks/av_throughput.py [--threads 1] [--rounds 3] [--data ../shared/data]``

* **audio**: the audio stage's whole path per item (:class:`rtaudit.engine.models.audio.AudioStage`:
  PyAV decode + resample, Silero VAD, Whisper tiny.en int8 with word times, text scoring) on
  (a) the 14 shared clips (``../shared/data/audio``, when present) and (b) a minute of "typical
  speech" made from the project's own clips with pauses (about 70 % speech); real-time factor =
  audio seconds / wall seconds. The raw limit is Whisper alone on the already decoded 16 kHz
  audio, without VAD (``WhisperRecognizer.transcribe``), and VAD alone.
* **video**: the video stage's decode + sampling + split (:class:`rtaudit.engine.models.video.VideoStage`)
  in decoded frames per second and sampled frames per second, on the shared videos and a rendered
  one; next to the raw per-frame cost of what the sampled frames then cost the image and OCR
  workers (NudeNet batch, RapidOCR + text model), on the same frames.

Each row is the median of ``--rounds`` runs (the best in brackets); model threads are
``--threads`` (CTranslate2 and onnxruntime intra-op), so 1 means one core. The 1-minute load
average is printed: this machine's cores are shared, compare rows within one run only.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from rtaudit.engine.audio.asr import WhisperRecognizer
from rtaudit.engine.audio.decode import SAMPLE_RATE_HZ, decode_audio
from rtaudit.engine.audio.vad import speech_segments
from rtaudit.engine.frames import SamplingParams
from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.models.audio import AudioStage, SpeechScorer
from rtaudit.engine.models.nudity import NudityStage
from rtaudit.engine.models.ocr import OCRStage
from rtaudit.engine.models.video import VideoStage
from rtaudit.engine.stage import process_batch
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.schemas.messages import MediaItem, ModalityTask
from rtaudit.tools.demo.clips import clip, encode_audio, encode_video, text_frame


def task(data: bytes, modality: str, part: str | None = None) -> ModalityTask:
    return ModalityTask(request_id="bench", tenant_id="bench", part=part or f"{modality}:0", modality=modality,  # type: ignore[arg-type]
                        lane="hi", created_at_ms=1, deadline_ms=10**13, routed_at_ms=1,
                        media=MediaItem(type=modality if modality != "video" else "video",  # type: ignore[arg-type]
                                        data_b64=base64.b64encode(data).decode()))


def timed(fn, rounds: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(median, best) wall seconds of ``fn()`` over ``rounds`` runs."""
    walls = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - started)
    return statistics.median(walls), min(walls)


def typical_speech(clips: list[np.ndarray], seconds: float = 60.0) -> np.ndarray:
    """About ``seconds`` of ``clips`` (``float32[n]`` mono 16 kHz) in turn with 0.3-1.2 s pauses
    (seeded): the shared clips when present (14 different speakers and sentences), else the two
    shipped ones. Repeating the same two sentences is not typical: Whisper's repetition guard
    (compression ratio over 2.4) then re-decodes each window at higher temperatures, 5× slower."""
    rng = np.random.default_rng(36)
    parts, total = [], 0
    while total < seconds * SAMPLE_RATE_HZ:
        c = clips[(len(parts) // 2) % len(clips)]
        pause = np.zeros(int(rng.uniform(0.3, 1.2) * SAMPLE_RATE_HZ), np.float32)
        parts += [c, pause]
        total += len(c) + len(pause)
    return np.concatenate(parts)


def row(name: str, seconds: float, median: float, best: float, unit: str) -> str:
    return f"| {name} | {seconds:.1f} | {median:.2f} | {seconds / median:.1f}× ({seconds / best:.1f}×) | {unit} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=("audio", "video"), default=None)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = ap.parse_args()
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}; threads per model: {args.threads}", file=sys.stderr)

    recognizer = WhisperRecognizer(cpu_threads=args.threads)
    scorer = TextScorer(prefer_gpu=False, intra_op_threads=args.threads)
    audio_stage = AudioStage(MediaPolicy(), SpeechScorer(recognizer, scorer))
    manifest = args.data / "audio" / "manifest.csv"
    if manifest.is_file():
        import csv

        with open(manifest, newline="") as f:
            paths = [manifest.parent / r["path"] for r in csv.DictReader(f)]
        shared = [p.read_bytes() for p in paths]
    else:
        shared = []
    speech = typical_speech([decode_audio(d, max_duration_s=3600).samples for d in shared] or [clip("benign"), clip("insult")])
    speech_flac = encode_audio(speech, fmt="flac", codec="flac")
    process_batch(audio_stage, [task(speech_flac, "audio")])  # warm

    if args.only != "video":
        audio_table(args, audio_stage, recognizer, shared, speech, speech_flac)
    if args.only != "audio":
        video_table(args, scorer)
    print(f"\nload average (1 min) after: {os.getloadavg()[0]:.2f}", file=sys.stderr)


def audio_table(args, audio_stage, recognizer, shared, speech, speech_flac) -> None:  # type: ignore[no-untyped-def]
    print("\n### Audio stage (one item at a time) vs raw limits\n")
    print("| path | audio s | wall s (median) | real-time factor (best) | what |")
    print("|---|---|---|---|---|")
    if shared:
        seconds = sum(decode_audio(d, max_duration_s=3600).duration_s for d in shared)
        med, best = timed(lambda: [process_batch(audio_stage, [task(d, "audio")]) for d in shared], args.rounds)
        print(row("audio stage, 14 shared clips", seconds, med, best, "decode+VAD+Whisper+text, per clip"))
    seconds = len(speech) / SAMPLE_RATE_HZ
    med, best = timed(lambda: process_batch(audio_stage, [task(speech_flac, "audio")]), args.rounds)
    print(row("audio stage, 1 min typical speech (FLAC)", seconds, med, best, "decode+VAD+Whisper+text"))
    decoded = decode_audio(speech_flac, max_duration_s=3600).samples
    med, best = timed(lambda: decode_audio(speech_flac, max_duration_s=3600), args.rounds)
    print(row("raw: PyAV decode + resample", seconds, med, best, "FLAC → 16 kHz mono"))
    med, best = timed(lambda: speech_segments(decoded), args.rounds)
    print(row("raw: Silero VAD", seconds, med, best, "onnxruntime, 1 thread"))
    med, best = timed(lambda: recognizer.transcribe(decoded), args.rounds)
    print(row("raw: Whisper tiny.en on the whole minute, no VAD", seconds, med, best, f"CTranslate2 int8, {args.threads} thread(s)"))
    silence = encode_audio(np.zeros(SAMPLE_RATE_HZ * 60, np.float32), fmt="flac", codec="flac")
    med, best = timed(lambda: process_batch(audio_stage, [task(silence, "audio")]), args.rounds)
    print(row("audio stage, 1 min of silence", 60.0, med, best, "VAD finds none: Whisper never runs"))


def video_table(args, scorer) -> None:  # type: ignore[no-untyped-def]
    print("\n### Video stage (decode + sample + split) and the per-frame cost downstream\n")
    video_stage = VideoStage(MediaPolicy(), SamplingParams(interval_s=1.0, max_frames=24))
    videos = [(p.name, p.read_bytes()) for p in sorted((args.data / "video").glob("*.mp4"))]
    videos.append(("rendered 480x200 10 fps 30 s", encode_video(
        lambda t: text_frame(f"caption {int(t) // 5}"), seconds=30)))
    print("| video | duration s | frames decoded | sampled | wall s (median) | decoded frames/s | sampled frames/s |")
    print("|---|---|---|---|---|---|---|")
    frames_for_models = []
    for name, data in videos:
        item = video_stage.prepare(task(data, "video"))
        med, best = timed(lambda data=data: video_stage.split(video_stage.prepare(task(data, "video"))), args.rounds)
        v = item.video
        print(f"| {name} | {v.duration_s:.1f} | {v.decoded} | {len(v.frames)} | {med:.2f} | {v.decoded / med:.0f} | {len(v.frames) / med:.1f} |")
        frames_for_models += video_stage.split(item).subtasks
    frames = [t for t in frames_for_models if t.modality == "image"]
    nudity = NudityStage(MediaPolicy(), prefer_gpu=False, intra_op_threads=args.threads)
    ocr = OCRStage(MediaPolicy(), scorer, intra_op_threads=args.threads)
    print("\n| downstream model on the sampled frames | frames | wall s (median) | frames/s |")
    print("|---|---|---|---|")
    for name, st, size in (("NudeNet 320n (image worker), batches of 8", nudity, 8), ("RapidOCR + text (OCR worker), batches of 2", ocr, 2)):
        process_batch(st, frames[:size])
        med, best = timed(lambda st=st, size=size: [process_batch(st, frames[i:i + size]) for i in range(0, len(frames), size)],
                          max(1, args.rounds - 1))
        print(f"| {name} | {len(frames)} | {med:.2f} | {len(frames) / med:.1f} |")


if __name__ == "__main__":
    main()
