"""The one settings object per process, validated at start-up.

Sources, strongest first: environment variables (``RTAUDIT_*``, nested with
``__``, plus the standard ``KAFKA_BOOTSTRAP_SERVERS``), then the TOML settings
file (``RTAUDIT_CONFIG``, else ``./rtaudit.toml`` when present), then defaults.
Library code never reads the environment: it takes values from here.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.media import MediaPolicy
from engine.policy import PolicyBook, TenantPolicy
from topics.catalog import DEFAULT_PARTITIONS

#: Loopback port of the embedded broker when no external bootstrap is configured.
EMBEDDED_PORT = 19092


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


class BatchSettings(BaseModel):
    """Micro-batch limits per stage: max items, and the window from the first item, ms."""

    model_config = ConfigDict(extra="forbid")
    max_size: dict[str, int] = Field(default_factory=lambda: {"text": 64, "image": 8, "ocr": 2})
    window_ms: float = Field(default=15.0, gt=0, le=10_000)


class Settings(BaseSettings):
    """All of a process's configuration. See ``rtaudit.toml`` for a commented example."""

    model_config = SettingsConfigDict(env_prefix="RTAUDIT_", env_nested_delimiter="__", extra="forbid")

    bootstrap_servers: str | None = Field(
        default=None, validation_alias=AliasChoices("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "bootstrap_servers")
    )
    #: ``local`` = the embedded tansu broker's client profile; ``production`` = library defaults.
    kafka_profile: Literal["local", "production"] | None = None
    embedded_port: int = EMBEDDED_PORT
    partitions: int = Field(default=DEFAULT_PARTITIONS, ge=1, le=256)
    #: replication factor of topics Faust creates itself (changelogs); default 1 local, 3 production.
    replication_factor: int | None = Field(default=None, ge=1, le=7)
    #: Prometheus exporter port of this process; 0 disables it.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    state_dir: Path = Path(".rtaudit")
    prefer_gpu: bool = True
    batch: BatchSettings = Field(default_factory=BatchSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    fusion_grace_ms: int = Field(default=250, ge=0)
    fusion_retention_ms: int = Field(default=60_000, ge=1000)
    default: TenantPolicy = Field(default_factory=TenantPolicy)
    tenants: dict[str, TenantPolicy] = Field(default_factory=dict)

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


def load_settings(path: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Read and validate settings. Raises :class:`SettingsError` naming the bad value."""
    data: dict[str, Any] = {}
    p = config_path(path)
    if p is not None:
        try:
            data = tomllib.loads(p.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SettingsError(f"cannot read settings file {p}: {exc}") from None
    data.update(overrides)
    try:
        return Settings(**data)
    except ValidationError as exc:
        where = f" in {p}" if p else ""
        raise SettingsError(f"invalid settings{where}: {exc}") from None
