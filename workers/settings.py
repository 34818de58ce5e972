"""The one settings object per process, validated at start-up.

Sources, strongest first: explicit arguments (``Settings(embedded_port=...)``,
``load_settings(path, **overrides)``), environment variables (``RTAUDIT_*``, nested
with ``__``, plus the standard ``KAFKA_BOOTSTRAP_SERVERS``), then the TOML settings
file (``RTAUDIT_CONFIG``, else ``./rtaudit.toml`` when present), then defaults.
Tables (``[tenants.acme]``) merge key by key across sources.
Library code never reads the environment: it takes values from here.
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from rtaudit.engine.batcher_config import BatcherConfig
from rtaudit.engine.cpu import usable_cores  # noqa: F401  (Settings.model_threads; callers import it from here too)
from rtaudit.engine.frames import SamplingParams
from rtaudit.engine.isolation import Isolated
from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.models.onnx import CudaOptions
from rtaudit.engine.policy import (
    IMAGE_CATEGORIES, KNOWN_CATEGORIES, LEXICAL_CATEGORIES, TEXT_CATEGORIES, PolicyBook, TenantPolicy, uncovered_stage_message,
    uncovered_stages, unknown_category_message,
)
from rtaudit.topics.catalog import DEFAULT_PARTITIONS
from rtaudit.workers.security import SecuritySettings
from rtaudit.workers.obs_settings import DriftSettings, TracingSettings

if TYPE_CHECKING:
    from rtaudit.engine.bundle_stage import StageOptions

#: Loopback port of the embedded broker when no external bootstrap is configured.
EMBEDDED_PORT = 19092


#: environment variables that set ``bootstrap_servers`` (the standard name first).
BOOTSTRAP_ENV = ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS")


class MediaSettings(BaseModel):
    """Media limits and the allowlists of media fetched by URI (``[media]``; :mod:`rtaudit.engine.media`)."""

    model_config = ConfigDict(extra="forbid")
    #: largest encoded media item, bytes (inline base64 decoded, or fetched by URI).
    max_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    #: largest decoded image, pixels (the decompression-bomb guard).
    max_pixels: int = Field(default=40_000_000, ge=1)
    #: folders a ``file://`` media URI may name (symlinks resolved); empty: no ``file://`` URI is fetched.
    allowed_file_roots: list[Path] = Field(default_factory=list)
    #: hosts an ``http(s)://`` media URI may name (never a loopback or private address); empty: none.
    allowed_http_hosts: list[str] = Field(default_factory=list)
    #: timeout of one http(s) media fetch, s.
    fetch_timeout_s: float = Field(default=5.0, gt=0)

    def policy(self) -> MediaPolicy:
        return MediaPolicy(
            max_bytes=self.max_bytes, max_pixels=self.max_pixels,
            allowed_file_roots=tuple(self.allowed_file_roots), allowed_http_hosts=tuple(self.allowed_http_hosts),
            fetch_timeout_s=self.fetch_timeout_s,
        )


class TimedMediaSettings(BaseModel):
    """Audio, video and animated images (``engine/audio``, ``engine/frames.py``).

    Attributes:
        min_duration_s: shorter audio is refused as undecodable, seconds.
        max_duration_s: longer audio or video is refused (``media_too_large``), seconds.
        asr_threads: CTranslate2 threads of the recognizer; 0 = :meth:`Settings.model_threads`.
        asr_beam_size: Whisper's decoding beam (1: greedy).
        frame_interval_s: a frame is sampled at least this often, seconds.
        scene_threshold: share (0-1) of a 32×32 grey thumbnail's pixels changed by more than 10 %
            since the last sampled frame at or above which a frame is sampled as a scene change.
        max_frames_video: most frames sampled from one video (the interval widens to fit).
        max_frames_animation: most frames sampled from one animated image.
        isolate_decoding: decode audio and video in a child process per item (a crash or hang
            in FFmpeg costs the item, not the worker).
        decode_timeout_s: longest decoding of one item in that child, seconds.
    """

    model_config = ConfigDict(extra="forbid")
    min_duration_s: float = Field(default=0.1, ge=0.0)
    max_duration_s: float = Field(default=1800.0, gt=0)
    asr_threads: int = Field(default=0, ge=0, le=64)
    asr_beam_size: int = Field(default=1, ge=1, le=10)
    frame_interval_s: float = Field(default=1.0, gt=0)
    scene_threshold: float = Field(default=0.05, gt=0, le=1)
    max_frames_video: int = Field(default=24, ge=1, le=1000)
    max_frames_animation: int = Field(default=12, ge=1, le=1000)
    isolate_decoding: bool = True
    decode_timeout_s: float = Field(default=60.0, gt=0)

    def decoder(self, *preload: str) -> Isolated | None:
        """The child-process decoder of an audio or video worker (``None`` when not isolating)."""
        return Isolated(self.decode_timeout_s, preload) if self.isolate_decoding else None

    def sampling(self, kind: Literal["video", "animation"]) -> SamplingParams:
        """Frame sampling of a video or an animated image."""
        cap = self.max_frames_video if kind == "video" else self.max_frames_animation
        return SamplingParams(interval_s=self.frame_interval_s, scene_threshold=self.scene_threshold, max_frames=cap)
class ExplainSettings(BaseModel):
    """The explain role (``workers/explain.py``, docs/explanations.md).

    Attributes:
        enabled: ``rtaudit up`` and ``rtaudit demo`` start the role (when the ``explain`` extra is installed).
        decisions: verdict decisions whose image parts get a heatmap; empty: on demand only.
        method: ``gradcam++`` or ``gradcam``.
        target: the open_nsfw class explained.
        heatmap_side_px: longest side of the evidence PNG, pixels.
        heatmap_max_bytes: most bytes of the evidence PNG (before base64).
        box_threshold: fraction of the peak that bounds the peak box.
        retention_ms: how long an image task stays held for on-demand requests, ms.
        held_bytes: most raw image-task bytes held in memory.
        verdict_wait_ms: how long a verdict or an on-demand request waits for an image task not read yet, ms.
        batch_size: most records per consume (each may cost a heatmap, ~30-200 ms on CPU).
    """

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    decisions: list[Literal["allow", "review", "block"]] = Field(default_factory=lambda: ["review", "block"])  # type: ignore[arg-type]  # mypy reads the lambda's list as list[str], not of the Literal
    method: Literal["gradcam++", "gradcam"] = "gradcam++"
    target: Literal["nsfw", "sfw"] = "nsfw"
    heatmap_side_px: int = Field(default=64, ge=8, le=512)
    heatmap_max_bytes: int = Field(default=8 * 1024, ge=256, le=1024 * 1024)
    box_threshold: float = Field(default=0.5, gt=0.0, le=1.0)
    retention_ms: int = Field(default=600_000, ge=1000)
    held_bytes: int = Field(default=256 * 1024 * 1024, ge=1024 * 1024)
    verdict_wait_ms: int = Field(default=30_000, ge=100)
    batch_size: int = Field(default=32, ge=1, le=2000)


#: Stages with a model batcher; per-stage maps (``max_size``, ``min_size``) are keyed by these.
BATCH_STAGES = ("text", "image", "ocr", "audio", "video")


class BatchProfile(BaseModel):
    """A named point on the latency/throughput curve (docs/batching.md "Batching profiles").

    Attributes:
        window_ms: window from the oldest queued item at zero consumer lag, ms.
        max_window_ms: window at lag >= ``lag_high``, ms.
        max_size: most items per batch, per stage.
        min_size: size limit at zero lag, per stage (grows to ``max_size`` with lag).
        lo_share: share of batch slots owed to the low lane when both lanes are backlogged.
        lag_low_batches: consumer lag at or below which window and size are at their minimum...
        lag_high_batches: ...and at or above which they are at their maximum.
        pause_hi_lag_batches: pause fetching the low lane while the high lane's lag is above this...
        resume_hi_lag_batches: ...and resume once it is at or below this.
        deadline_margin_ms: close a batch this long before (earliest deadline − expected duration).
        busy_low: model occupancy (share of the last second spent inferring) above which the
            window and size limit grow as they do with lag, reaching their maximum at 0.95;
            ``None`` or 1 = lag alone (see :class:`rtaudit.engine.batcher_config.BatcherConfig`).

    Lags are in *batches* of the stage's ``max_size`` (so one profile fits a 64-item text
    stage and a 2-item OCR stage alike); the batcher gets ``ceil(batches · max_size)`` messages.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    window_ms: float = Field(gt=0, le=10_000)
    max_window_ms: float = Field(gt=0, le=10_000)
    max_size: dict[str, int]
    min_size: dict[str, int]
    lo_share: float = Field(ge=0.0, le=1.0)
    lag_low_batches: float = Field(ge=0)
    lag_high_batches: float = Field(gt=0)
    pause_hi_lag_batches: float = Field(ge=0)
    resume_hi_lag_batches: float = Field(ge=0)
    deadline_margin_ms: float = Field(default=2.0, ge=0)
    busy_low: float | None = Field(default=None, ge=0.0, le=1.0)


#: The named profiles. ``balanced`` is the default (15 ms window, the issue's default).
PROFILES: dict[str, BatchProfile] = {
    # smallest batches and windows; the low lane is paused as soon as the high lane lags
    "latency": BatchProfile(
        window_ms=2.0, max_window_ms=8.0,
        max_size={"text": 16, "image": 4, "ocr": 1, "audio": 2, "video": 1}, min_size={"text": 4, "image": 1, "ocr": 1, "audio": 1, "video": 1},
        lo_share=0.1, lag_low_batches=0, lag_high_batches=1, pause_hi_lag_batches=0, resume_hi_lag_batches=0,
    ),
    "balanced": BatchProfile(
        window_ms=15.0, max_window_ms=40.0,
        max_size={"text": 64, "image": 8, "ocr": 2, "audio": 2, "video": 1}, min_size={"text": 16, "image": 2, "ocr": 1, "audio": 1, "video": 1},
        lo_share=0.2, lag_low_batches=0, lag_high_batches=4, pause_hi_lag_batches=0.25, resume_hi_lag_batches=0.0625,
        busy_low=0.8,
    ),
    # full batches from the start, long windows; the low lane keeps a larger share
    "throughput": BatchProfile(
        window_ms=40.0, max_window_ms=100.0,
        max_size={"text": 256, "image": 16, "ocr": 4, "audio": 2, "video": 1}, min_size={"text": 256, "image": 16, "ocr": 4, "audio": 1, "video": 1},
        lo_share=0.3, lag_low_batches=0, lag_high_batches=8, pause_hi_lag_batches=2, resume_hi_lag_batches=0.5,
        busy_low=0.6,
    ),
}
ProfileName = Literal["latency", "balanced", "throughput"]


class BatchSettings(BaseModel):
    """Micro-batching: a named profile, and explicit overrides that win over it.

    ``RTAUDIT_BATCH__PROFILE=latency`` picks a profile; any other key set here
    (file or ``RTAUDIT_BATCH__<KEY>``) replaces the profile's value; ``max_size``
    and ``min_size`` override per stage (``{ text = 32 }`` keeps the profile's
    image and OCR sizes). Every stage's resulting :class:`BatcherConfig` is
    validated at start-up.
    """

    model_config = ConfigDict(extra="forbid")
    profile: ProfileName = "balanced"
    window_ms: float | None = Field(default=None, gt=0, le=10_000)
    max_window_ms: float | None = Field(default=None, gt=0, le=10_000)
    max_size: dict[str, int] = Field(default_factory=dict)
    min_size: dict[str, int] = Field(default_factory=dict)
    lo_share: float | None = Field(default=None, ge=0.0, le=1.0)
    lag_low_batches: float | None = Field(default=None, ge=0)
    lag_high_batches: float | None = Field(default=None, gt=0)
    pause_hi_lag_batches: float | None = Field(default=None, ge=0)
    resume_hi_lag_batches: float | None = Field(default=None, ge=0)
    deadline_margin_ms: float | None = Field(default=None, ge=0)
    busy_low: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _valid_per_stage(self) -> "BatchSettings":
        for stage in BATCH_STAGES:
            self.config(stage)  # raises ValueError naming the bad combination
        return self

    def effective(self) -> BatchProfile:
        """The profile with the explicit overrides applied."""
        base = PROFILES[self.profile]
        overrides = {k: v for k, v in self.model_dump(exclude={"profile", "max_size", "min_size"}).items() if v is not None}
        max_size = {**base.max_size, **self.max_size}
        # an overridden max below the profile's min drags the min down with it
        min_size = {s: min(n, max_size.get(s, n)) for s, n in {**base.min_size, **self.min_size}.items()}
        merged = {**base.model_dump(), **overrides, "max_size": max_size, "min_size": min_size}
        merged["max_window_ms"] = max(merged["max_window_ms"], merged["window_ms"])
        merged["resume_hi_lag_batches"] = min(merged["resume_hi_lag_batches"], merged["pause_hi_lag_batches"])
        return BatchProfile(**merged)

    def config(self, stage: str, max_size: int | None = None) -> BatcherConfig:
        """The batcher limits of ``stage`` (``text``, ``image``, ``ocr``; others get the text sizes);
        ``max_size``: the size limit instead of the profile's (a GPU stage's, :meth:`Settings.batcher_config`),
        lag thresholds scaled by it as by the profile's."""
        p = self.effective()
        max_size = max_size or p.max_size.get(stage, p.max_size.get("text", 8))

        def messages(batches: float) -> int:
            return math.ceil(batches * max_size - 1e-9)

        lag_low = messages(p.lag_low_batches)
        return BatcherConfig(
            max_size=max_size, min_size=min(p.min_size.get(stage, max_size), max_size),
            window_ms=p.window_ms, max_window_ms=p.max_window_ms,
            lag_low=lag_low, lag_high=max(messages(p.lag_high_batches), lag_low + 1),
            lo_share=p.lo_share, pause_hi_lag=messages(p.pause_hi_lag_batches),
            resume_hi_lag=min(messages(p.resume_hi_lag_batches), messages(p.pause_hi_lag_batches)),
            deadline_margin_ms=p.deadline_margin_ms,
            busy_low=None if p.busy_low is None or p.busy_low >= 1.0 else p.busy_low,
        )


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
#: the escape hatch of the category checks, as a settings file and the environment spell it.
ALLOW_UNKNOWN_KEY = "allow_unknown_category = true (RTAUDIT_ALLOW_UNKNOWN_CATEGORY=1)"


class _EnvSource(EnvSettingsSource):
    """The environment, with whichever of :data:`BOOTSTRAP_ENV` is set under the field's own
    name, so an explicit ``Settings(bootstrap_servers=...)`` beats it like any other argument."""

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        for name in BOOTSTRAP_ENV:
            if name in data:
                data["bootstrap_servers"] = data.pop(name)
        return data


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated with ``top``; tables (dicts) present in both are merged key by key."""
    out = dict(base)
    for key, value in top.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


class Settings(BaseSettings):
    """All of a process's configuration. See ``rtaudit.toml`` for a commented example."""

    model_config = SettingsConfigDict(env_prefix="RTAUDIT_", env_nested_delimiter="__", extra="forbid")

    #: the Kafka cluster, ``host:port[,host:port...]``; unset: the embedded tansu broker on loopback.
    bootstrap_servers: str | None = Field(
        default=None, validation_alias=AliasChoices(*BOOTSTRAP_ENV, "bootstrap_servers")
    )
    #: ``local`` = the embedded tansu broker's client profile; ``production`` = library defaults.
    kafka_profile: Literal["local", "production"] | None = None
    #: loopback port of the embedded broker (when ``bootstrap_servers`` is unset).
    embedded_port: int = EMBEDDED_PORT
    #: partitions of every keyed topic, fixed when ``rtaudit topics create`` creates it.
    partitions: int = Field(default=DEFAULT_PARTITIONS, ge=1, le=256)
    #: replication factor of topics Faust creates itself (changelogs); default 1 local, 3 production.
    replication_factor: int | None = Field(default=None, ge=1, le=7)
    #: Prometheus exporter port of this process; 0 disables it.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    #: address the Prometheus exporter binds: loopback unless set (``0.0.0.0`` in a container).
    metrics_host: str = "127.0.0.1"
    #: per-role working directories of the workers (Faust data dirs), logs and the model store.
    state_dir: Path = Path(".rtaudit")
    #: run the stages ``gpu.stage_devices`` places on CUDA there when onnxruntime-gpu and a GPU are
    #: present; ``false``: every stage on CPU.
    prefer_gpu: bool = True
    gpu: GpuSettings = Field(default_factory=GpuSettings)
    #: onnxruntime intra-op threads per model session on CPU; 0 = auto: one less than the usable
    #: cores, at least 1 (docs/batching.md "Inference threads"). Resolved by :meth:`model_threads`.
    inference_threads: int = Field(default=0, ge=0, le=256)
    #: the text worker's model (``workers/text.py``): ``minilm`` (MiniLM + alt-profanity-check),
    #: ``lexical`` (alt-profanity-check alone) or ``null`` (fixed scores: the overhead bench only).
    text_model: Literal["minilm", "lexical", "null"] = "minilm"
    #: inference time the ``null`` text model spends per item, ms (it sleeps in the inference
    #: thread): a stage as slow as a real model without its CPU, for the chaos harness and tests.
    null_model_ms_per_item: float = Field(default=0.0, ge=0.0, le=600_000.0)
    #: librdkafka ``max.poll.interval.ms`` of the fleet's consumers (``None``: the client's
    #: default, 300,000); at least the session timeout (3,000 in the local profile).
    max_poll_interval_ms: int | None = Field(default=None, ge=1000, le=86_400_000)
    #: the MiniLM encoder graph (``engine/text/encoder.py``): ``fp32`` (the ONNX export), ``int8``
    #: (its dynamic int8 quantization, CPU kernels) or ``auto`` (the CPU default measured by
    #: ``benchmarks/int8_encoder.py`` when the encoder runs on CPU, fp32 on CUDA). The choice is
    #: part of the text model's version string, so each partial names what served it.
    text_encoder_precision: Literal["auto", "fp32", "fp16", "int8"] = "auto"
    #: folder of the built models (the MiniLM ONNX graphs of ``rtaudit text build-encoder``) and of the
    #: embedding memos of training and ``rtaudit eval``; unset: ``~/.cache/rtaudit``. The container image
    #: sets it (``RTAUDIT_CACHE``) to where its build step exported the graphs.
    cache: Path | None = None
    #: root of the threat and self-harm sets of training and evaluation (fetched by hand:
    #: docs/text-moderation.md); unset: ``~/.cache/rtaudit/data``. ``--safety-data`` wins.
    safety_data: Path | None = None
    #: root of the per-language abuse sets (docs/text-moderation.md, "Other languages"); unset:
    #: ``~/.cache/rtaudit/multilingual``. ``--data`` of the multilingual commands wins.
    multilingual_data: Path | None = None
    batch: BatchSettings = Field(default_factory=BatchSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    av: TimedMediaSettings = Field(default_factory=TimedMediaSettings)
    #: how long fusion waits past a request's deadline for partials already in flight, ms.
    fusion_grace_ms: int = Field(default=250, ge=0)
    #: how long fusion remembers a decided request id to drop its duplicates, ms.
    fusion_retention_ms: int = Field(default=60_000, ge=1000)
    explain: ExplainSettings = Field(default_factory=ExplainSettings)
    drift: DriftSettings = Field(default_factory=DriftSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    #: the policy of every tenant without its own ``[tenants.<id>]`` table.
    default: TenantPolicy = Field(default_factory=TenantPolicy)
    tenants: dict[str, TenantPolicy] = Field(default_factory=dict)
    #: TLS and SASL of every Kafka client (confluent-kafka and Faust/aiokafka): ``workers/security.py``.
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    #: accept thresholds of categories no stage scores, and tenants whose thresholds cover none of
    #: a stage's categories (the settings file's ``policy set --allow-unknown-category``).
    allow_unknown_category: bool = False

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings):
        # explicit arguments win over the environment; :func:`load_settings` puts the settings
        # file under the environment (it merges the two before passing them as arguments)
        return (init_settings, _EnvSource(settings_cls))

    @model_validator(mode="after")
    def _policies_can_flag(self) -> "Settings":
        """Refuse a policy with a threshold for a category no stage scores (a misspelt category
        never flags) or with none for any category of a stage (that stage's inputs are all
        allowed), unless ``allow_unknown_category``. Raises ValueError naming the table."""
        if self.allow_unknown_category:
            return self
        escape = f"set {ALLOW_UNKNOWN_KEY}"
        stages = self.scored_categories()
        for where, policy in [("default.thresholds", self.default),
                              *((f"tenants.{t}.thresholds", p) for t, p in self.tenants.items())]:
            unknown = sorted(c for c in policy.thresholds if c not in KNOWN_CATEGORIES)
            if unknown:
                raise ValueError(unknown_category_message(where, unknown, escape))
            uncovered = uncovered_stages(policy, stages)
            if uncovered:
                raise ValueError(uncovered_stage_message(where, uncovered, stages, escape))
        return self

    def scored_categories(self) -> dict[str, tuple[str, ...]]:
        """The categories each stage of this fleet scores (the text stage's follow ``text_model``)."""
        return {"text": LEXICAL_CATEGORIES if self.text_model == "lexical" else TEXT_CATEGORIES,
                "ocr": TEXT_CATEGORIES, "image": IMAGE_CATEGORIES}

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers to use: the configured ones, else the embedded broker's address."""
        return self.bootstrap_servers or f"127.0.0.1:{self.embedded_port}"

    @property
    def profile(self) -> Literal["local", "production"]:
        if self.kafka_profile is not None:
            return self.kafka_profile
        return "local" if self.bootstrap_servers is None else "production"

    def gpu_for(self, stage: str) -> bool:
        """Whether ``stage`` asks for CUDA: ``prefer_gpu`` and ``gpu.stage_devices[stage] == "cuda"``
        (the session still falls back to CPU, with one warning, where CUDA is not usable)."""
        return self.prefer_gpu and self.gpu.stage_devices.get(stage, "cpu") == "cuda"  # type: ignore[call-overload]  # str key into a Literal-keyed dict

    def batcher_config(self, stage: str) -> BatcherConfig:
        """``batch.config(stage)``, with ``gpu.max_batch[stage]`` as the size limit when the stage runs on
        CUDA (it asks for it and the installed onnxruntime has the CUDA provider)."""
        from rtaudit.engine.models.onnx import CUDA, providers

        limit = self.gpu.max_batch.get(stage)  # type: ignore[call-overload]  # str key into a Literal-keyed dict
        if limit is None or not self.gpu_for(stage) or CUDA not in providers(True):
            return self.batch.config(stage)
        return self.batch.config(stage, max_size=limit)

    def stage_options(self) -> StageOptions:
        """How this process builds a model bundle's stage (:func:`rtaudit.engine.bundle_stage.load_stage`)."""
        from rtaudit.engine.bundle_stage import StageOptions

        return StageOptions(prefer_gpu=self.prefer_gpu, intra_op_threads=self.model_threads(),
                            encoder_precision=self.text_encoder_precision, media_policy=self.media.policy(),
                            cache=self.cache)

    def model_threads(self) -> int:
        """onnxruntime intra-op threads each model session of this process gets.

        ``inference_threads`` when set, else the usable cores (CPU affinity) minus one, at
        least 1: the event loop, the Kafka client's thread and — locally — the broker and
        the other workers need a core, and onnxruntime's threads meet at a barrier after
        every operator, so one preempted thread stalls the whole batch. Measured on 2 cores
        (docs/batching.md "Inference threads"): the text worker's knee rose from 99.7 to 112 texts/s
        with 1 thread instead of 2. In a container, set it to the CPUs the pod may use:
        the affinity mask does not show a CPU quota.
        """
        if self.inference_threads:
            return self.inference_threads
        return max(1, usable_cores() - 1)

    @property
    def policies(self) -> PolicyBook:
        return PolicyBook(default=self.default, tenants=self.tenants)




class SettingsError(ValueError):
    """The settings file or environment holds a bad value (the message names it)."""


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The settings file to read: ``explicit``, else ``$RTAUDIT_CONFIG``, else ``./rtaudit.toml`` if it exists."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("RTAUDIT_CONFIG")
    if env:
        return Path(env)
    local = Path("rtaudit.toml")
    return local if local.exists() else None


#: ``RTAUDIT_*`` environment variables that are not settings fields (read elsewhere, documented there).
OTHER_ENV_VARS = frozenset({
    "RTAUDIT_CONFIG",  # the settings file (this module)
    "RTAUDIT_BROKER_LOG",  # RUST_LOG of the embedded broker (tools/fleet/broker.py)
    "RTAUDIT_REQUIRE_SHARED_DATA",  # tests: a missing ../shared is a failure (tests/conftest.py)
    "RTAUDIT_REQUIRE_SAFETY_DATA",  # tests: missing threat/self-harm sets are a failure (tests/conftest.py)
    "RTAUDIT_REQUIRE_MULTILINGUAL_DATA",  # tests: missing per-language sets are a failure (tests/conftest.py)
})
ENV_PREFIX = "RTAUDIT_"
ENV_NESTED = "__"


def _env_names(model: type[BaseModel], prefix: str) -> list[str]:
    """Every environment variable name that sets a field of ``model`` (nested models expanded)."""
    names = []
    for name, field in model.model_fields.items():
        env = f"{prefix}{name.upper()}"
        names.append(env)
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            names += _env_names(sub, env + ENV_NESTED)
    return names


def _is_open_map(model: type[BaseModel], parts: list[str]) -> bool:
    """Whether ``parts`` (lower-case field path) reaches into a ``dict`` field, whose keys are free."""
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            model = sub
            continue
        return getattr(sub, "__origin__", None) is dict and i < len(parts) - 1
    return False


def check_environment(environ: dict[str, str] | os._Environ[str] | None = None) -> None:
    """Refuse an ``RTAUDIT_*`` environment variable that sets nothing (usually a typo).

    Raises:
        SettingsError: naming the variable and the closest valid name (difflib).
    """
    environ = os.environ if environ is None else environ
    valid = set(_env_names(Settings, ENV_PREFIX)) | OTHER_ENV_VARS
    for key in environ:
        upper = key.upper()
        if not upper.startswith(ENV_PREFIX) or upper in valid:
            continue
        parts = upper[len(ENV_PREFIX):].lower().split(ENV_NESTED)
        if _is_open_map(Settings, parts):  # e.g. RTAUDIT_TENANTS__ACME__SLO_MS, RTAUDIT_BATCH__MAX_SIZE__TEXT
            continue
        close = difflib.get_close_matches(upper, sorted(valid), n=1, cutoff=0.6)
        hint = f": did you mean {close[0]}?" if close else f" (valid names: {', '.join(sorted(valid))})"
        raise SettingsError(f"unknown environment variable {key}{hint}")


#: Parts of environment variable names whose values are never echoed in an error.
_SECRET_WORDS = ("SECURITY", "PASSWORD", "SECRET", "TOKEN")


def _env_vars_of(loc: tuple[Any, ...], environ: Any) -> list[str]:
    """The environment variables that supplied the value at ``loc``: the one that names it or a
    parent of it, else (for a table-wide check such as ``security``) those that set keys inside it."""
    upper = {k.upper(): k for k in environ}
    parts = [str(p) for p in loc]
    if parts and parts[0] == "bootstrap_servers":
        for name in BOOTSTRAP_ENV:
            if name in upper:
                return [upper[name]]
    for n in range(len(parts), 0, -1):
        name = ENV_PREFIX + ENV_NESTED.join(parts[:n]).upper()
        if name in upper:
            return [upper[name]]
    inner = ENV_PREFIX + ENV_NESTED.join(parts).upper() + ENV_NESTED
    return sorted(upper[k] for k in upper if parts and k.startswith(inner))


def _describe(exc: ValidationError, file: Path | None, environ: Any) -> str:
    """One clause per error: where the value came from (environment variable, file or code), and why it is bad.
    Values are echoed except those of secret-looking variables."""
    clauses = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        where = ".".join(str(p) for p in loc) or "<settings>"
        envs = _env_vars_of(loc, environ)
        if envs:
            named = [e if any(w in e.upper() for w in _SECRET_WORDS) else f"{e}={environ[e]!r}" for e in envs]
            source = f"environment variable{'s' if len(envs) > 1 else ''} {', '.join(named)}"
        else:
            source = str(file) if file else "the defaults"
        msg = err["msg"].removeprefix("Value error, ")
        value = err.get("input")
        secret = any(w.lower() in where.lower() for w in _SECRET_WORDS)
        shown = f" = {value!r}" if isinstance(value, str | int | float | bool) and not secret and not envs else ""
        if not loc and ": " in msg:  # a check across fields (the policies): its message starts with the table
            where, msg = msg.split(": ", 1)
        clauses.append(f"{where}{shown} (from {source}): {msg}")
    return "; ".join(clauses)


def load_settings(path: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Read and validate settings.

    Raises:
        SettingsError: an unreadable settings file, an unknown ``RTAUDIT_*`` environment
            variable, or a bad value; the message names the key, the value's source
            (environment variable or file) and why it is bad.
    """
    data: dict[str, Any] = {}
    p = config_path(path)
    if p is not None:
        try:
            data = tomllib.loads(p.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SettingsError(f"cannot read settings file {p}: {exc}") from None
    check_environment()
    data = _deep_merge(_deep_merge(data, _EnvSource(Settings)()), overrides)
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise SettingsError(f"invalid settings: {_describe(exc, p, os.environ)}") from None
