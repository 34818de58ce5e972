"""onnxruntime session construction: CUDA when the installed build and the host have it, CPU otherwise."""

from __future__ import annotations

import logging

import onnxruntime as ort

log = logging.getLogger(__name__)


def providers(prefer_gpu: bool = True) -> list[str]:
    """Execution providers to ask for, best first (CUDA needs the ``onnxruntime-gpu`` build)."""
    available = ort.get_available_providers()
    wanted = (["CUDAExecutionProvider"] if prefer_gpu else []) + ["CPUExecutionProvider"]
    return [p for p in wanted if p in available]


def session(model_path: str, *, prefer_gpu: bool = True, intra_op_threads: int = 0) -> ort.InferenceSession:
    """An ``InferenceSession`` for ``model_path``.

    Args:
        intra_op_threads: threads one operator may use on CPU; ``0`` lets onnxruntime
            choose (one per core). A worker that shares its cores with the event loop,
            a broker or other workers runs faster with fewer threads than cores: ORT's
            threads meet at a barrier after every operator, so one preempted thread
            stalls the rest (see docs/batching.md "Inference threads").

    The CPU memory arena is off: a worker swaps model versions at run time (issue 9), and
    the arena keeps every buffer it ever grew. Measured with ``rtaudit.workers.bench.serving_memory``
    (20 text swaps through the worker's serving path, 2 cores): with the arena, resident
    memory swung between two plateaus and ended +5.5 % over swap 2; without it, flat at
    +0.7 %. MiniLM batch-64 throughput without it: 1.006x the arena's (interleaved runs).
    """
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = intra_op_threads
    opts.enable_cpu_mem_arena = False
    sess = ort.InferenceSession(model_path, sess_options=opts, providers=providers(prefer_gpu))
    log.info("onnx session %s on %s", model_path, sess.get_providers())
    return sess
