"""The ``[gpu]`` settings section (a field of :class:`rtaudit.workers.settings.Settings`; read by the
text, image and OCR workers and :meth:`Settings.batcher_config`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rtaudit.engine.models.onnx import CudaOptions


class GpuSettings(BaseModel):
    """Where each stage runs and how the CUDA execution provider is set up (``[gpu]`` installs only:
    with the CPU build of onnxruntime, or ``prefer_gpu = false``, every stage runs on CPU).

    Attributes:
        stage_devices: ``cpu`` | ``cuda`` per stage (``text``, ``image``, ``ocr``); a stage not listed
            runs on CPU. Default as the seed deploys it: text on CPU (int8 MiniLM), vision on the GPU.
        max_batch: micro-batch size limit per stage when that stage runs on CUDA (items); replaces
            ``batch.max_size`` for it. GPU batches are larger than CPU ones: a batch is one kernel
            launch sequence, so per-item cost falls until the card is full (the device check,
            ``benchmarks/gpu/run.sh``, measures items/s at batch 1-256 per model).
        device_id, mem_limit_mib, arena_extend_strategy, cudnn_conv_algo_search, use_tf32,
            do_copy_in_default_stream: :class:`rtaudit.engine.models.onnx.CudaOptions`
            (``mem_limit_mib`` 0: no cap).
    """

    model_config = ConfigDict(extra="forbid")

    #: ``cpu`` or ``cuda`` per stage (``text``, ``image``, ``ocr``); a stage not listed runs on CPU.
    stage_devices: dict[Literal["text", "image", "ocr"], Literal["cpu", "cuda"]] = Field(
        default_factory=lambda: {"text": "cpu", "image": "cuda", "ocr": "cuda"})  # type: ignore[arg-type]  # the lambda's dict read as dict[str, str]
    #: micro-batch size limit of a stage that runs on CUDA, items (replaces ``batch.max_size`` for it).
    max_batch: dict[Literal["text", "image", "ocr"], int] = Field(
        default_factory=lambda: {"text": 256, "image": 64, "ocr": 16})  # type: ignore[arg-type]  # the lambda's dict read as dict[str, int]
    #: CUDA device ordinal.
    device_id: int = Field(default=0, ge=0)
    #: cap of the CUDA provider's memory arena, MiB; 0: no cap.
    mem_limit_mib: int = Field(default=0, ge=0)
    #: arena growth: as requested (tight when workers share a card) or in powers of two.
    arena_extend_strategy: Literal["kNextPowerOfTwo", "kSameAsRequested"] = "kSameAsRequested"
    #: cuDNN convolution algorithm choice: ``EXHAUSTIVE`` benchmarks each input shape once.
    cudnn_conv_algo_search: Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"] = "HEURISTIC"
    #: TF32 tensor cores for fp32 MatMul/Conv (faster, ~10-bit mantissa products).
    use_tf32: bool = False
    #: copy inputs and outputs in the compute stream (onnxruntime's recommendation).
    do_copy_in_default_stream: bool = True

    @model_validator(mode="after")
    def _batches_positive(self) -> "GpuSettings":
        bad = {s: n for s, n in self.max_batch.items() if not 1 <= n <= 4096}
        if bad:
            raise ValueError(f"gpu.max_batch must be 1..4096 per stage, got {bad}")
        return self

    def cuda_options(self) -> CudaOptions:
        """The provider options these settings name."""
        return CudaOptions(device_id=self.device_id, gpu_mem_limit_bytes=self.mem_limit_mib << 20,
                           arena_extend_strategy=self.arena_extend_strategy,
                           cudnn_conv_algo_search=self.cudnn_conv_algo_search,
                           do_copy_in_default_stream=self.do_copy_in_default_stream, use_tf32=self.use_tf32)
