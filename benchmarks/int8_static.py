"""Dynamic vs static int8 MiniLM encoder: batch independence, fidelity to fp32, speed (one run).

Usage: ``python benchmarks/int8_static.py [--data ../shared/data] [--calibration minmax|percentile] [--texts 600]``

The shipped int8 graph (:func:`rtaudit.engine.text.encoder_build.quantize_encoder_onnx`) quantizes activations per batch
at run time (``DynamicQuantizeLinear``), so a text's embedding depends a little on what it is batched with. This
builds a statically quantized graph from the same fp32 export (onnxruntime's ``quantize_static``, QDQ format, the
same ops and weight settings: MatMul and Gather, per-channel int8 weights with ``reduce_range``; activation ranges
calibrated on 500 Davidson and HateXplain *train* texts padded to :data:`~rtaudit.engine.text.encoder.MAX_TOKENS`)
into a temporary directory and prints, for fp32, dynamic int8 and static int8, one onnxruntime thread each:

* ``texts/s b64``: embeddings of ``--texts`` OLID dev texts in batches of 64 (tokenization included);
* ``cos fp32 min / mean``: cosine of each embedding to the fp32 graph's;
* ``max |alone - batch|``: the largest change of any embedding coordinate of the first 100 texts, scored one at a
  time against in one batch.

One run, graphs measured one after another on a shared machine: compare ratios within the run. Measured 2026-12-03
in docs/benchmarks.md, section "The int8 text encoder".
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--calibration", choices=("minmax", "percentile"), default="minmax")
    ap.add_argument("--texts", type=int, default=600)
    args = ap.parse_args()

    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

    from rtaudit.modelbuild.text import data as D
    from rtaudit.engine.text import encoder as E
    from rtaudit.engine.text import encoder_build as EB
    from rtaudit.engine.text import encoder_delta as ED
    from rtaudit.engine.text.normalize import normalize

    delta = ED.EncoderDelta.from_manifest()
    fp32, dynamic = EB.ensure_encoder_onnx("fp32", delta), EB.ensure_encoder_onnx("int8", delta)
    tok = E._tokenizer(EB.model_dir(), E.MAX_TOKENS)
    calibration = [normalize(e.text).text for name in ("hatexplain", "davidson")
                   for e in D.load(name, args.data, "train")[:4000:16]]
    dev = [normalize(e.text).text for e in D.load("olid", args.data, "dev")[:args.texts]]

    def feeds(texts: list[str], pad: int | None = None) -> dict[str, np.ndarray]:
        enc = tok.encode_batch(texts)
        n = pad or max(len(e.ids) for e in enc)
        ids = np.zeros((len(texts), n), np.int64)
        mask = np.zeros_like(ids)
        for i, e in enumerate(enc):
            ids[i, :len(e.ids)], mask[i, :len(e.ids)] = e.ids, 1
        return {"input_ids": ids, "attention_mask": mask}

    class Reader(CalibrationDataReader):
        def __init__(self, texts: list[str], batch: int = 16) -> None:
            self.batches = iter([feeds(texts[i:i + batch], E.MAX_TOKENS) for i in range(0, len(texts) - batch + 1, batch)])

        def get_next(self):  # type: ignore[no-untyped-def]
            return next(self.batches, None)

    def session(path: Path) -> ort.InferenceSession:
        o = ort.SessionOptions()
        o.intra_op_num_threads = o.inter_op_num_threads = 1
        return ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])

    def embed(s: ort.InferenceSession, texts: list[str], batch: int = 64) -> np.ndarray:
        return np.vstack([s.run(["embedding"], feeds(texts[i:i + batch]))[0] for i in range(0, len(texts), batch)])

    with tempfile.TemporaryDirectory() as tmp:
        static = Path(tmp) / "static-int8.onnx"
        started = time.perf_counter()
        method = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile}[args.calibration]
        quantize_static(str(fp32), str(static), Reader(calibration), quant_format=QuantFormat.QDQ,
                        op_types_to_quantize=["MatMul", "Gather"], per_channel=True, reduce_range=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, calibrate_method=method,
                        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        print(f"static int8 ({args.calibration}, {len(calibration)} calibration texts) built in "
              f"{time.perf_counter() - started:.0f} s, {static.stat().st_size / 1e6:.1f} MB")
        graphs = {"fp32": session(fp32), "dynamic int8": session(dynamic), "static int8": session(static)}
        reference = embed(graphs["fp32"], dev)
        print("| graph | texts/s b64 | cos fp32 min | cos fp32 mean | max abs(alone - batch) |\n|---|---|---|---|---|")
        for name, s in graphs.items():
            started = time.perf_counter()
            e = embed(s, dev)
            rate = len(dev) / (time.perf_counter() - started)
            alone = np.vstack([s.run(["embedding"], feeds([t]))[0] for t in dev[:100]])
            change = float(np.abs(alone - embed(s, dev[:100])).max())
            cos = (e * reference).sum(1) / np.linalg.norm(e, axis=1) / np.linalg.norm(reference, axis=1)
            print(f"| {name} | {rate:.1f} | {cos.min():.4f} | {cos.mean():.4f} | {change:.5f} |")


if __name__ == "__main__":
    main()
