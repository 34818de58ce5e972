"""onnxruntime session construction: CUDA when asked for and usable, CPU otherwise, never a crash loop.

The CUDA execution provider needs the ``onnxruntime-gpu`` build (``pip install -e .[gpu]``; same
import name) *and* a usable CUDA runtime (driver, cuBLAS, cuDNN of the build's CUDA major). When
the build has the provider but the runtime is missing, onnxruntime logs its own error and quietly
gives the session only the CPU provider; :func:`session` checks the providers the session really
got, says so in one warning line per process, and serves on CPU.

Provider options (:class:`CudaOptions`) are set deliberately rather than left to onnxruntime's
defaults; their meaning is onnxruntime's "CUDA Execution Provider" documentation
(onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import onnxruntime as ort

log = logging.getLogger(__name__)

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"

#: device names a stage may be placed on (the ``gpu.stage_devices`` setting).
Device = Literal["cpu", "cuda"]


@dataclass(frozen=True)
class CudaOptions:
    """Options of onnxruntime's CUDA execution provider for one session.

    Attributes:
        device_id: CUDA device ordinal (``CUDA_VISIBLE_DEVICES`` numbering).
        gpu_mem_limit_bytes: cap of the provider's memory arena, bytes; ``0``: no cap (the
            provider's default, the whole card).
        arena_extend_strategy: ``kSameAsRequested`` grows the arena by what each run asks
            (tight memory when several workers share a card); ``kNextPowerOfTwo`` grows in
            powers of two (fewer allocations, more slack).
        cudnn_conv_algo_search: ``EXHAUSTIVE`` benchmarks every cuDNN convolution algorithm once
            per input shape (best for the image model's fixed 320×320 input; its first batch of
            each shape is slow), ``HEURISTIC`` asks cuDNN's heuristics (no warm-up cost),
            ``DEFAULT`` takes the first algorithm.
        do_copy_in_default_stream: copy inputs and outputs in the compute stream (onnxruntime's
            default and its recommendation: no cross-stream races); ``False`` overlaps copies with
            compute on a second stream.
        use_tf32: let fp32 MatMul/Conv use TF32 tensor cores (Ampere and later): ~10-bit mantissa
            products, faster; ``False`` keeps full fp32 so fp32 scores match the CPU's.
    """

    device_id: int = 0
    gpu_mem_limit_bytes: int = 0
    arena_extend_strategy: Literal["kNextPowerOfTwo", "kSameAsRequested"] = "kSameAsRequested"
    cudnn_conv_algo_search: Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"] = "HEURISTIC"
    do_copy_in_default_stream: bool = True
    use_tf32: bool = False

    def provider_options(self) -> dict[str, str]:
        """The options as onnxruntime takes them (``dict[str, str]``)."""
        opts = {
            "device_id": str(self.device_id),
            "arena_extend_strategy": self.arena_extend_strategy,
            "cudnn_conv_algo_search": self.cudnn_conv_algo_search,
            "do_copy_in_default_stream": "1" if self.do_copy_in_default_stream else "0",
            "use_tf32": "1" if self.use_tf32 else "0",
        }
        if self.gpu_mem_limit_bytes:
            opts["gpu_mem_limit"] = str(self.gpu_mem_limit_bytes)
        return opts


#: the one warning line per process when CUDA was asked for and could not be had.
_fallback_warned = False


def providers(prefer_gpu: bool = True) -> list[str]:
    """Execution providers to ask for, best first: CUDA (when ``prefer_gpu`` and the installed
    build has it), then CPU. This says what the *build* offers; whether the host's CUDA runtime
    works is only known once a session is made (:func:`session`)."""
    available = ort.get_available_providers()
    wanted = ([CUDA] if prefer_gpu else []) + [CPU]
    return [p for p in wanted if p in available]


def provider_list(prefer_gpu: bool, cuda: CudaOptions | None = None) -> list[str | tuple[str, dict[str, str]]]:
    """:func:`providers` with CUDA's options attached, as ``InferenceSession(providers=...)`` takes them."""
    opts = (cuda or CudaOptions()).provider_options()
    return [(p, opts) if p == CUDA else p for p in providers(prefer_gpu)]


def _warn_fallback(model_path: str, reason: str) -> None:
    global _fallback_warned
    if not _fallback_warned:
        _fallback_warned = True
        log.warning("CUDA asked for but not usable (%s): serving %s and every later model of this process on CPU",
                    reason, model_path)


def session(model_path: str, *, prefer_gpu: bool = True, intra_op_threads: int = 0,
            cuda: CudaOptions | None = None, profile_prefix: str | None = None) -> ort.InferenceSession:
    """An ``InferenceSession`` for ``model_path``: on CUDA when ``prefer_gpu`` and the build and host
    allow it, else on CPU.

    Args:
        intra_op_threads: threads one operator may use on CPU; ``0`` lets onnxruntime
            choose (one per core). A worker that shares its cores with the event loop,
            a broker or other workers runs faster with fewer threads than cores: ORT's
            threads meet at a barrier after every operator, so one preempted thread
            stalls the rest (see docs/batching.md "Inference threads").
        cuda: CUDA provider options (:class:`CudaOptions`; ``None``: its defaults).
        profile_prefix: turn onnxruntime's profiler on, writing ``<prefix>_<date>.json``
            (:func:`node_placement` reads it); for the device check, never in serving.

    Never raises for a missing CUDA runtime: a session that cannot be made with CUDA, or that
    onnxruntime quietly made on CPU only, is made on CPU, with one warning line per process.

    The CPU memory arena is off: a worker swaps model versions at run time, and the arena keeps
    every buffer it ever grew. Measured with ``rtaudit.tools.bench.serving_memory`` (20 text
    swaps through the worker's serving path, 2 cores): with the arena, resident memory swung
    between two plateaus and ended +5.5 % over swap 2; without it, flat at +0.7 %. MiniLM
    batch-64 throughput without it: 1.006x the arena's (interleaved runs).

    Raises:
        onnxruntime's errors for a missing or invalid model file (not caught).
    """
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = intra_op_threads
    opts.enable_cpu_mem_arena = False
    if profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    wanted = provider_list(prefer_gpu, cuda)
    asked_cuda = any(p[0] == CUDA for p in wanted if isinstance(p, tuple))
    try:
        sess = ort.InferenceSession(model_path, sess_options=opts, providers=wanted)
    except Exception as exc:  # noqa: BLE001 - a broken CUDA runtime raises many kinds; the file's own errors re-raise below
        if not asked_cuda:
            raise
        _warn_fallback(model_path, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        sess = ort.InferenceSession(model_path, sess_options=opts, providers=[CPU])
    if asked_cuda and CUDA not in sess.get_providers():
        _warn_fallback(model_path, "onnxruntime gave the session no CUDA provider (driver, CUDA or cuDNN libraries missing)")
    log.info("onnx session %s on %s", model_path, sess.get_providers())
    return sess


def on_cuda(sess: ort.InferenceSession) -> bool:
    """Whether ``sess`` got the CUDA provider (it may still place single nodes on CPU: :func:`node_placement`)."""
    return CUDA in sess.get_providers()


def node_placement(profile_json: str | Path) -> dict[str, int]:
    """Kernel runs per execution provider in an onnxruntime profile (``InferenceSession.end_profiling()``'s
    file): ``{"CUDAExecutionProvider": 812, "CPUExecutionProvider": 14}``. The proof that a graph ran
    on the GPU rather than only that the provider was registered.

    Raises:
        OSError, ValueError: the file is missing or not onnxruntime's JSON profile.
    """
    events = json.loads(Path(profile_json).read_text())
    counts: Counter[str] = Counter()
    for event in events:
        args: dict[str, Any] = event.get("args") or {}
        if event.get("cat") == "Node" and "provider" in args:
            counts[str(args["provider"])] += 1
    return dict(counts)
