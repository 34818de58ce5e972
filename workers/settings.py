"""The one settings object per process, validated at start-up.

Sources, strongest first: explicit arguments (``Settings(embedded_port=...)``,
``load_settings(path, **overrides)``), environment variables (``RTAUDIT_*``, nested
with ``__``, plus the standard ``KAFKA_BOOTSTRAP_SERVERS``), then the TOML settings
file (``RTAUDIT_CONFIG``, else ``./rtaudit.toml`` when present), then defaults.
Tables (``[tenants.acme]``) merge key by key across sources.
Library code never reads the environment: it takes values from here.

The sections' models live beside the roles that read them: ``[batch]`` in
:mod:`rtaudit.workers.batch_settings`, ``[gpu]`` in :mod:`rtaudit.workers.gpu_settings`, ``[av]`` in
:mod:`rtaudit.workers.av_settings`, ``[explain]`` in :mod:`rtaudit.workers.explain_settings`, ``[drift]``
and ``[tracing]`` in :mod:`rtaudit.workers.obs_settings`, ``[security]`` in :mod:`rtaudit.workers.security`.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from rtaudit.engine.batcher_config import BatcherConfig
from rtaudit.engine.cpu import usable_cores  # noqa: F401  (Settings.model_threads; callers import it from here too)
from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.policy import (
    IMAGE_CATEGORIES, KNOWN_CATEGORIES, LEXICAL_CATEGORIES, TEXT_CATEGORIES, PolicyBook, TenantPolicy, uncovered_stage_message,
    uncovered_stages, unknown_category_message,
)
from rtaudit.topics.catalog import DEFAULT_PARTITIONS
from rtaudit.workers.av_settings import TimedMediaSettings
from rtaudit.workers.batch_settings import BatchSettings
from rtaudit.workers.explain_settings import ExplainSettings
from rtaudit.workers.gpu_settings import GpuSettings
from rtaudit.workers.obs_settings import DriftSettings, TracingSettings
from rtaudit.workers.security import SecuritySettings

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
    embedded_port: int = Field(default=EMBEDDED_PORT, ge=1, le=65535)
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
    #: the English second stage of the ``minilm`` text model (``engine/text/cascade.py``): texts whose highest
    #: fast score (MiniLM + alt-profanity-check, any category) falls in the profile's band are read again by multilingual-e5-small with English heads and
    #: the two scores averaged. ``off`` (default), ``conservative`` [0.4, 0.6], ``balanced`` [0.25, 0.75],
    #: ``aggressive`` [0.1, 0.9]; docs/text-moderation.md has the measured macro-F1 and texts/s of each.
    text_cascade: Literal["off", "conservative", "balanced", "aggressive"] = "off"
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
    def _tenant_ids_are_valid(self) -> "Settings":
        """Refuse a ``[tenants.<id>]`` table whose id no request could carry (the request schema's ``TenantId``:
        1-64 of ``A-Za-z0-9._-``): its policy would never apply. Raises ValueError naming the id."""
        from rtaudit.schemas.codec import valid_tenant_id

        for tenant in self.tenants:
            if not valid_tenant_id(tenant):
                raise ValueError(f"tenants.{tenant!r}: not a tenant id a request can carry (1-64 characters of "
                                 "A-Z a-z 0-9 . _ -), so its policy would never apply")
        return self

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
                            cache=self.cache, text_cascade=self.text_cascade)

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
    "RTAUDIT_CI_STEP_TIMEOUT_S",  # CI: the wall-clock cap of each step (.ci/run)
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


def _close_key(loc: tuple[Any, ...]) -> str:
    """``": did you mean <key>?"`` for the unknown key at ``loc`` (a path of keys from :class:`Settings`), or ``""``."""
    model: Any = Settings
    for part in loc[:-1]:
        field = getattr(model, "model_fields", {}).get(str(part))
        model = getattr(field, "annotation", None) if field is not None else None
        if not isinstance(model, type) or not issubclass(model, BaseModel):
            return ""
    close = difflib.get_close_matches(str(loc[-1]), sorted(model.model_fields), n=1, cutoff=0.6) if loc else []
    return f": did you mean {'.'.join([*map(str, loc[:-1]), close[0]])}?" if close else ""


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
        if err["type"] == "extra_forbidden":  # a misspelt key in the file: name the nearest real one
            msg = f"no such setting{_close_key(loc)}"
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
