"""The one settings object per process, validated at start-up.

Sources, strongest first: environment variables (``RTAUDIT_*``, nested with
``__``, plus the standard ``KAFKA_BOOTSTRAP_SERVERS``), then the TOML settings
file (``RTAUDIT_CONFIG``, else ``./rtaudit.toml`` when present), then defaults.
Library code never reads the environment: it takes values from here.
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rtaudit.engine.batcher import BatcherConfig
from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.policy import PolicyBook, TenantPolicy
from rtaudit.topics.catalog import DEFAULT_PARTITIONS
from rtaudit.workers.security import SecuritySettings

#: Loopback port of the embedded broker when no external bootstrap is configured.
EMBEDDED_PORT = 19092


#: environment variables that set ``bootstrap_servers`` (the standard name first).
BOOTSTRAP_ENV = ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS")


class MediaSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    max_pixels: int = Field(default=40_000_000, ge=1)
    allowed_file_roots: list[Path] = Field(default_factory=list)
    allowed_http_hosts: list[str] = Field(default_factory=list)
    fetch_timeout_s: float = Field(default=5.0, gt=0)

    def policy(self) -> MediaPolicy:
        return MediaPolicy(
            max_bytes=self.max_bytes, max_pixels=self.max_pixels,
            allowed_file_roots=tuple(self.allowed_file_roots), allowed_http_hosts=tuple(self.allowed_http_hosts),
            fetch_timeout_s=self.fetch_timeout_s,
        )


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
    decisions: list[Literal["allow", "review", "block"]] = Field(default_factory=lambda: ["review", "block"])
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
BATCH_STAGES = ("text", "image", "ocr")


class BatchProfile(BaseModel):
    """A named point on the latency/throughput curve (see README "Batching profiles").

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
            ``None`` or 1 = lag alone (see :class:`rtaudit.engine.batcher.BatcherConfig`).

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
        max_size={"text": 16, "image": 4, "ocr": 1}, min_size={"text": 4, "image": 1, "ocr": 1},
        lo_share=0.1, lag_low_batches=0, lag_high_batches=1, pause_hi_lag_batches=0, resume_hi_lag_batches=0,
    ),
    "balanced": BatchProfile(
        window_ms=15.0, max_window_ms=40.0,
        max_size={"text": 64, "image": 8, "ocr": 2}, min_size={"text": 16, "image": 2, "ocr": 1},
        lo_share=0.2, lag_low_batches=0, lag_high_batches=4, pause_hi_lag_batches=0.25, resume_hi_lag_batches=0.0625,
        busy_low=0.8,
    ),
    # full batches from the start, long windows; the low lane keeps a larger share
    "throughput": BatchProfile(
        window_ms=40.0, max_window_ms=100.0,
        max_size={"text": 256, "image": 16, "ocr": 4}, min_size={"text": 256, "image": 16, "ocr": 4},
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

    def config(self, stage: str) -> BatcherConfig:
        """The batcher limits of ``stage`` (``text``, ``image``, ``ocr``; others get the text sizes)."""
        p = self.effective()
        max_size = p.max_size.get(stage, p.max_size.get("text", 8))

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


class Settings(BaseSettings):
    """All of a process's configuration. See ``rtaudit.toml`` for a commented example."""

    model_config = SettingsConfigDict(env_prefix="RTAUDIT_", env_nested_delimiter="__", extra="forbid")

    bootstrap_servers: str | None = Field(
        default=None, validation_alias=AliasChoices(*BOOTSTRAP_ENV, "bootstrap_servers")
    )
    #: ``local`` = the embedded tansu broker's client profile; ``production`` = library defaults.
    kafka_profile: Literal["local", "production"] | None = None
    embedded_port: int = EMBEDDED_PORT
    partitions: int = Field(default=DEFAULT_PARTITIONS, ge=1, le=256)
    #: replication factor of topics Faust creates itself (changelogs); default 1 local, 3 production.
    replication_factor: int | None = Field(default=None, ge=1, le=7)
    #: Prometheus exporter port of this process; 0 disables it.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    #: address the Prometheus exporter binds: loopback unless set (``0.0.0.0`` in a container).
    metrics_host: str = "127.0.0.1"
    state_dir: Path = Path(".rtaudit")
    prefer_gpu: bool = True
    #: onnxruntime intra-op threads per model session on CPU; 0 = auto: one less than the usable
    #: cores, at least 1 (README "Inference threads"). Resolved by :meth:`model_threads`.
    inference_threads: int = Field(default=0, ge=0, le=256)
    #: the text worker's model (``workers/text.py``): ``minilm`` (MiniLM + alt-profanity-check),
    #: ``lexical`` (alt-profanity-check alone) or ``null`` (fixed scores: the overhead bench only).
    text_model: Literal["minilm", "lexical", "null"] = "minilm"
    #: the MiniLM encoder graph (``engine/text/encoder.py``): ``fp32`` (the ONNX export), ``int8``
    #: (its dynamic int8 quantization, CPU kernels) or ``auto`` (the CPU default measured by
    #: ``benchmarks/int8_encoder.py`` when the encoder runs on CPU, fp32 on CUDA). The choice is
    #: part of the text model's version string, so each partial names what served it.
    text_encoder_precision: Literal["auto", "fp32", "int8"] = "auto"
    batch: BatchSettings = Field(default_factory=BatchSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    fusion_grace_ms: int = Field(default=250, ge=0)
    fusion_retention_ms: int = Field(default=60_000, ge=1000)
    explain: ExplainSettings = Field(default_factory=ExplainSettings)
    default: TenantPolicy = Field(default_factory=TenantPolicy)
    tenants: dict[str, TenantPolicy] = Field(default_factory=dict)
    #: TLS and SASL of every Kafka client (confluent-kafka and Faust/aiokafka): ``workers/security.py``.
    security: SecuritySettings = Field(default_factory=SecuritySettings)

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings):  # type: ignore[no-untyped-def]
        return (env_settings, init_settings)

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers to use: the configured ones, else the embedded broker's address."""
        return self.bootstrap_servers or f"127.0.0.1:{self.embedded_port}"

    @property
    def profile(self) -> Literal["local", "production"]:
        if self.kafka_profile is not None:
            return self.kafka_profile
        return "local" if self.bootstrap_servers is None else "production"

    def model_threads(self) -> int:
        """onnxruntime intra-op threads each model session of this process gets.

        ``inference_threads`` when set, else the usable cores (CPU affinity) minus one, at
        least 1: the event loop, the Kafka client's thread and — locally — the broker and
        the other workers need a core, and onnxruntime's threads meet at a barrier after
        every operator, so one preempted thread stalls the whole batch. Measured on 2 cores
        (README "Inference threads"): the text worker's knee rose from 99.7 to 112 texts/s
        with 1 thread instead of 2. In a container, set it to the CPUs the pod may use:
        the affinity mask does not show a CPU quota.
        """
        if self.inference_threads:
            return self.inference_threads
        return max(1, usable_cores() - 1)

    @property
    def policies(self) -> PolicyBook:
        return PolicyBook(default=self.default, tenants=self.tenants)


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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
    "RTAUDIT_CACHE",  # built-model cache directory (engine/text/encoder.py)
    "RTAUDIT_BROKER_LOG",  # RUST_LOG of the embedded broker (workers/broker.py)
    "RTAUDIT_REQUIRE_SHARED_DATA",  # tests: a missing ../shared is a failure (tests/conftest.py)
    "RTAUDIT_SAFETY_DATA",  # the threat and self-harm sets (engine/text/data.py)
    "RTAUDIT_REQUIRE_SAFETY_DATA",  # tests: missing threat/self-harm sets are a failure (tests/conftest.py)
    "RTAUDIT_MULTILINGUAL_DATA",  # the per-language abuse sets (engine/text/multilingual_data.py)
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
            shown = [e if any(w in e.upper() for w in _SECRET_WORDS) else f"{e}={environ[e]!r}" for e in envs]
            source = f"environment variable{'s' if len(envs) > 1 else ''} {', '.join(shown)}"
        else:
            source = str(file) if file else "the defaults"
        msg = err["msg"].removeprefix("Value error, ")
        value = err.get("input")
        secret = any(w.lower() in where.lower() for w in _SECRET_WORDS)
        shown = f" = {value!r}" if isinstance(value, str | int | float | bool) and not secret and not envs else ""
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
    data.update(overrides)
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise SettingsError(f"invalid settings: {_describe(exc, p, os.environ)}") from None
