"""fp32 vs int8 MiniLM encoder (issue 11 item 4): texts/s at batch 1 and 64, dev macro-F1 of the same heads.

Usage: ``python benchmarks/int8_encoder.py [--threads 1] [--rounds 3] [--max-rows N] [--data ../shared/data]
[--json out.json]``

One run measures both graphs that ``rtaudit text build-encoder`` puts in the cache
(built first if missing), on CPU, with the same onnxruntime intra-op threads:

* **throughput**: :meth:`rtaudit.engine.text.encoder.MiniLMEncoder.encode` (tokenization included,
  no embedding memo) on dev texts of Davidson, OLID and HateXplain (seeded-hash sample):
  ``--b64-texts`` texts in batches of 64, ``--b1-texts`` one at a time. Also timed, as a
  reference: the fp32 graph after int8's first build step (BERT fusions) without quantizing,
  which shows how much of the gain is quantization. The graphs
  alternate within each of ``--rounds`` rounds (so a load spike from other processes hits
  all of them), and the table gives the median round and the best round.
* **quality**: ``rtaudit eval``'s classification (:func:`rtaudit.modelbuild.text.evaluation.classification`)
  with the trained heads of ``engine/text/artifacts`` on top of each graph's embeddings:
  macro-F1 per dev set (COLD is scored by the Chinese model, which uses no encoder, so its
  row only confirms that; the Jigsaw sample is a test split: printed for reference, not part
  of the target). Embeddings are memoised per encoder version in the cache, so a rerun
  re-measures throughput and re-scores in seconds.

Target: int8 ≥ 2× fp32 texts/s at batch 64 and macro-F1 within 0.01 of fp32 on every dev set.
The 1-, 5- and 15-minute load averages are printed before and after: this machine's cores are
shared, and the figures are only comparable within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rtaudit.modelbuild.text import data as D  # noqa: E402
from rtaudit.engine.text import encoder as E  # noqa: E402
from rtaudit.engine.text import encoder_build as EB  # noqa: E402
from rtaudit.modelbuild.text import evaluation as ev  # noqa: E402

PRECISIONS = ("fp32", "int8")
TARGET_SPEEDUP, TARGET_F1_LOSS = 2.0, 0.01


def load() -> str:
    return "load average {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


def dev_texts(root: Path, n: int) -> list[str]:
    """``n`` dev texts, a third each from Davidson, OLID and HateXplain (seeded-hash order)."""
    per = -(-n // 3)
    texts = [r.text for d in ("davidson", "olid", "hatexplain") for r in ev.sample(D.load(d, root, "dev"), per)]
    return texts[:n]


def rate(enc: E.MiniLMEncoder, texts: list[str], batch_size: int) -> float:
    started = time.perf_counter()
    for lo in range(0, len(texts), batch_size):
        enc.encode(texts[lo:lo + batch_size])
    return len(texts) / (time.perf_counter() - started)


def throughput(threads: int, texts: list[str], single: list[str], rounds: int,
               fused: Path | None) -> dict[str, dict[str, list[float]]]:
    """Per graph, texts/s per round at batch 64 and 1; ``fused``: also time that graph as ``fp32-fused``."""
    from rtaudit.engine.models.onnx import session

    encoders = {p: E.MiniLMEncoder(prefer_gpu=False, intra_op_threads=threads, precision=p, batch_size=64)
                for p in PRECISIONS}
    if fused is not None:
        encoders["fp32-fused"] = E.MiniLMEncoder(prefer_gpu=False, intra_op_threads=threads, precision="fp32")
        encoders["fp32-fused"].session = session(str(fused), prefer_gpu=False, intra_op_threads=threads)
    for enc in encoders.values():
        enc.encode(texts[:64])  # warm-up: allocations, kernel selection
    names = list(encoders)
    out: dict[str, dict[str, list[float]]] = {p: {"b1": [], "b64": []} for p in names}
    for r in range(rounds):
        for p in names if r % 2 == 0 else names[::-1]:
            out[p]["b64"].append(rate(encoders[p], texts, 64))
            out[p]["b1"].append(rate(encoders[p], single, 1))
        print(f"  round {r + 1}/{rounds}: " + ", ".join(f"{p} b64 {out[p]['b64'][-1]:.1f} b1 {out[p]['b1'][-1]:.1f}"
                                                      for p in names) + f" texts/s ({load()})", flush=True)
    return out


def quality(root: Path, threads: int, max_rows: int | None,
            retrain: bool) -> dict[str, dict[str, tuple[str, int, float]]]:
    """Macro-F1 per eval set: ``fp32`` and ``int8`` with the shipped heads; with ``retrain`` also
    ``int8 retrained``: the English head refitted on int8 embeddings by ``rtaudit text train``'s own
    :func:`rtaudit.modelbuild.text.train.train_english` (train rows fitted; C and thresholds on dev rows, as for
    the shipped head; no test split), kept in memory: ``engine/text/artifacts`` is not touched."""
    from rtaudit.engine.text.scoring import TextScorer

    out: dict[str, dict[str, tuple[str, int, float]]] = {}

    def measure(label: str, scorer: TextScorer, started: float) -> None:
        _, sets = ev.classification(scorer, root, max_rows=max_rows)
        out[label] = {r.dataset: (r.split, r.n, r.macro_f1) for r in sets}
        print(f"  {label} ({scorer.encoder.version}): " + ", ".join(f"{d} {f:.4f}" for d, (_, _, f) in out[label].items())
              + f" in {time.perf_counter() - started:.0f} s", flush=True)

    for p in PRECISIONS:
        started = time.perf_counter()
        scorer = TextScorer(prefer_gpu=False, intra_op_threads=threads, encoder_precision=p)
        memo = scorer.encoder.use_cache()
        measure(p, scorer, started)
        memo.save()
    if retrain:
        from rtaudit.modelbuild.text.train import train_english

        started = time.perf_counter()
        scorer.head, report = train_english(root, scorer.encoder, scorer.lexical)  # the int8 scorer, memo on
        memo.save()
        print("  int8 head refit: " + ", ".join(f"{c} C={report[c]['C']} t={report[c]['threshold']}"
                                                for c in scorer.head.categories), flush=True)
        measure("int8 retrained", scorer, started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads for both graphs "
                        "(1 = what a text worker gets on 2 cores)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--b64-texts", type=int, default=768)
    parser.add_argument("--b1-texts", type=int, default=192)
    parser.add_argument("--quality-threads", type=int, default=2, help="threads while embedding the dev sets")
    parser.add_argument("--max-rows", type=int, default=None, help="cap each dev set (default: all rows)")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--retrain", action="store_true", help="also refit the English head on int8 embeddings "
                        "(embeds the ~33k English train rows with int8 once: minutes; memoised after)")
    parser.add_argument("--no-fused", action="store_true", help="do not also time the fused fp32 graph "
                        "(int8's first build step alone: what fusion gives without quantization)")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    started = time.perf_counter()
    load_before = os.getloadavg()
    print(f"int8 encoder benchmark, {os.cpu_count()} CPUs, {load()}", flush=True)
    for p in PRECISIONS:
        path = EB.ensure_encoder_onnx(p)
        print(f"  {p}: {path.name} ({path.stat().st_size / 1e6:.1f} MB)", flush=True)
    texts = dev_texts(args.data, args.b64_texts)
    single = texts[::max(1, len(texts) // args.b1_texts)][: args.b1_texts]
    print(f"throughput: {len(texts)} texts at batch 64, {len(single)} at batch 1, {args.threads} intra-op thread(s), "
          f"{args.rounds} rounds", flush=True)
    with tempfile.TemporaryDirectory(prefix="rtaudit-fused-") as tmp:
        fused = None if args.no_fused else EB.fuse_bert_onnx(EB.onnx_path("fp32"), Path(tmp) / "fused.onnx")
        tp = throughput(args.threads, texts, single, args.rounds, fused)
    q = {} if args.skip_quality else (print("dev macro-F1 (same heads):", flush=True)
                                      or quality(args.data, args.quality_threads, args.max_rows, args.retrain))
    load_after = os.getloadavg()

    med = {p: {k: statistics.median(v) for k, v in tp[p].items()} for p in tp}
    best = {p: {k: max(v) for k, v in tp[p].items()} for p in tp}
    print()
    print(f"| texts/s ({args.threads} thread{'s' if args.threads > 1 else ''}) | fp32 median (best) "
          f"| int8 median (best) | int8 / fp32 median (best) |")
    print("|---|---|---|---|")
    for k, label in (("b1", "batch 1"), ("b64", "batch 64")):
        print(f"| {label} | {med['fp32'][k]:.1f} ({best['fp32'][k]:.1f}) | {med['int8'][k]:.1f} ({best['int8'][k]:.1f}) "
              f"| {med['int8'][k] / med['fp32'][k]:.2f}× ({best['int8'][k] / best['fp32'][k]:.2f}×) |")
    if "fp32-fused" in med:
        f = med["fp32-fused"]
        print(f"\nreference, fp32 with int8's BERT fusions but not quantized: batch 1 {f['b1']:.1f} "
              f"({max(tp['fp32-fused']['b1']):.1f}), batch 64 {f['b64']:.1f} ({max(tp['fp32-fused']['b64']):.1f}) texts/s; "
              f"int8 / fused fp32 at batch 64: {med['int8']['b64'] / f['b64']:.2f}×")
    speedup = med["int8"]["b64"] / med["fp32"]["b64"]
    ok_speed = speedup >= TARGET_SPEEDUP
    ok_f1 = True
    if q:
        print()
        rt = "int8 retrained" in q
        print("| set | split | n | fp32 macro-F1 | int8, same heads | Δ | within 0.01 |"
              + (" int8, head refit on int8 | Δ | within 0.01 |" if rt else ""))
        print("|---|---|---|---|---|---|---|" + ("---|---|---|" if rt else ""))
        ok_rt = True
        for d, (split, n, f32) in q["fp32"].items():
            cells = []
            for label in ("int8", "int8 retrained") if rt else ("int8",):
                f8 = q[label][d][2]
                within = f8 >= f32 - TARGET_F1_LOSS
                if split == "dev" and label == "int8":
                    ok_f1 &= within
                if split == "dev" and label != "int8":
                    ok_rt &= within
                cells.append(f"{f8:.4f} | {f8 - f32:+.4f} | "
                             f"{('yes' if within else 'NO') if split == 'dev' else 'test split: reference only'}")
            print(f"| {d} | {split} | {n} | {f32:.4f} | " + " | ".join(cells) + " |")
    print()
    print(f"target batch-64 speedup ≥ {TARGET_SPEEDUP:.0f}×: {speedup:.2f}× (median) → {'met' if ok_speed else 'NOT met'}; "
          + (f"macro-F1 within {TARGET_F1_LOSS} on every dev set, same heads: {'met' if ok_f1 else 'NOT met'}"
             + (f", head refit on int8: {'met' if ok_rt else 'NOT met'}" if q and "int8 retrained" in q else "")
             if q else "quality skipped"))
    print("load average before {:.2f}, {:.2f}, {:.2f}; after {:.2f}, {:.2f}, {:.2f}; took {:.0f} s".format(
        *load_before, *load_after, time.perf_counter() - started))
    if args.json:
        args.json.write_text(json.dumps({
            "threads": args.threads, "rounds": tp, "median": med, "best": best, "speedup_b64_median": speedup,
            "macro_f1": q, "load_before": load_before, "load_after": load_after,
            "graphs": {p: EB.onnx_path(p).name for p in PRECISIONS}}, indent=1))


if __name__ == "__main__":
    main()
