"""fp16 vs fp32 MiniLM encoder: dev macro-F1 of the same heads (the quality gate of the fp16 graph).

Usage: ``python benchmarks/gpu/fp16_quality.py [--gpu] [--max-rows N] [--data ../shared/data] [--json out.json]``

For each graph, ``rtaudit eval``'s classification (:func:`rtaudit.modelbuild.text.evaluation.classification`)
with the trained heads of ``engine/text/artifacts`` on top of that graph's embeddings: macro-F1 per dev
set. ``--gpu`` runs both graphs on the CUDA provider (onnxruntime-gpu), else on CPU (onnxruntime's CPU
kernels compute the fp16 graph in fp16 for MatMul and in fp32 where it has no fp16 kernel, so the
CUDA figures can differ slightly; both are printed where measured). The Jigsaw sample is a test
split: printed, not part of the gate. Gate: |Δ macro-F1| ≤ 0.005 on every dev set
(``text_encoder_precision = "auto"`` serves fp16 on CUDA only where it held).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

GATE = 0.005


def main() -> int:
    from rtaudit.modelbuild.text import evaluation as ev
    from rtaudit.engine.text.scoring import TextScorer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-rows", type=int, default=None)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    out: dict[str, dict[str, tuple[str, int, float]]] = {}
    for p in ("fp32", "fp16"):
        started = time.perf_counter()
        scorer = TextScorer(prefer_gpu=args.gpu, intra_op_threads=args.threads, encoder_precision=p)
        memo = scorer.encoder.use_cache()
        _, sets = ev.classification(scorer, args.data, max_rows=args.max_rows)
        memo.save()
        out[p] = {r.dataset: (r.split, r.n, r.macro_f1) for r in sets}
        print(f"{p} ({scorer.encoder.version}, {scorer.encoder.session.get_providers()[0]}): "
              + ", ".join(f"{d} {f:.4f}" for d, (_, _, f) in out[p].items()) + f" in {time.perf_counter() - started:.0f} s",
              flush=True)
    print(f"\n| set | split | n | fp32 macro-F1 | fp16 macro-F1 | Δ | within {GATE} |\n|---|---|---|---|---|---|---|")
    ok = True
    for d, (split, n, f32) in out["fp32"].items():
        f16 = out["fp16"].get(d, (split, n, float("nan")))[2]
        within = abs(f16 - f32) <= GATE
        if split == "dev":
            ok &= within
        print(f"| {d} | {split} | {n} | {f32:.4f} | {f16:.4f} | {f16 - f32:+.4f} | {'yes' if within else 'no'}"
              f"{'' if split == 'dev' else ' (not gated)'} |")
    print(f"\nfp16 within {GATE} macro-F1 of fp32 on every dev set: {'met' if ok else 'NOT met'} "
          f"({'CUDA' if args.gpu else 'CPU'} provider)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
