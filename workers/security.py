"""Client security for a real cluster (TLS, SASL), in one place for both Kafka clients.

:class:`SecuritySettings` is the ``[security]`` table of the settings (environment:
``RTAUDIT_SECURITY__<KEY>``). It is validated when the settings load, so a bad
combination (a SASL mechanism without a username, a client certificate without its
key, a CA file that does not exist) stops the process at start-up with the key named.
From it come:

* :func:`librdkafka_config` — the ``security.protocol`` / ``ssl.*`` / ``sasl.*`` keys of
  confluent-kafka (the CLI, the client, the admin calls, the bench);
* :func:`faust_credentials` — ``faust.auth`` credentials with an :class:`ssl.SSLContext`,
  which Faust hands to aiokafka (every worker).

Secrets (``ssl_key_password``, ``sasl_password``, ``oauth_client_secret``) are
:class:`pydantic.SecretStr`: their ``repr`` and ``str`` are ``**********``, they are never
logged. Each can instead come from a file (``*_file``, e.g. a Kubernetes secret mount),
read once at load, trailing newline stripped.

OAUTHBEARER uses the OIDC client-credentials grant (RFC 6749 §4.4): librdkafka fetches
and refreshes the token itself (``sasl.oauthbearer.method=oidc``); for aiokafka,
:class:`OIDCTokenProvider` does the same request with httpx.
"""

from __future__ import annotations

import ssl
import time
from pathlib import Path
from typing import Any, Literal

from aiokafka.abc import AbstractTokenProvider
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
#: (secret field, the field naming a file that holds it)
SECRET_FILES = (("ssl_key_password", "ssl_key_password_file"), ("sasl_password", "sasl_password_file"),
                ("oauth_client_secret", "oauth_client_secret_file"))
#: SASL mechanisms that authenticate with a username and a password.
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecuritySettings(BaseModel):
    """TLS and SASL settings of every Kafka client of the process (see ``rtaudit.toml`` ``[security]``).

    Attributes:
        protocol: ``security.protocol``; unset: ``SASL_SSL`` when a SASL mechanism is set,
            else ``SSL`` when any ``ssl_*`` file is set, else ``PLAINTEXT``.
        ssl_ca_file: PEM file of the CA(s) that signed the brokers' certificates; unset: the
            system's CA store (what managed clusters with public certificates need).
        ssl_cert_file, ssl_key_file: PEM client certificate and private key (mutual TLS); both or neither.
        ssl_key_password, ssl_key_password_file: passphrase of an encrypted private key.
        ssl_check_hostname: verify that the broker's certificate names the host (keep it on).
        sasl_mechanism: ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` or ``OAUTHBEARER``.
        sasl_username, sasl_password, sasl_password_file: credentials of the password mechanisms.
        oauth_token_url, oauth_client_id, oauth_client_secret, oauth_client_secret_file, oauth_scope:
            the OIDC client-credentials grant of ``OAUTHBEARER``.

    Raises (at load, as the settings' ``ValueError``): a combination that cannot work, or a
    named file that does not exist or cannot be read.
    """

    model_config = ConfigDict(extra="forbid")
    protocol: Protocol | None = None
    ssl_ca_file: Path | None = None
    ssl_cert_file: Path | None = None
    ssl_key_file: Path | None = None
    ssl_key_password: SecretStr | None = None
    ssl_key_password_file: Path | None = None
    ssl_check_hostname: bool = True
    sasl_mechanism: Mechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_password_file: Path | None = None
    oauth_token_url: str | None = Field(default=None, pattern=r"^https?://")
    oauth_client_id: str | None = None
    oauth_client_secret: SecretStr | None = None
    oauth_client_secret_file: Path | None = None
    oauth_scope: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _secrets_from_files(cls, data: Any) -> Any:
        """Read each ``*_file`` secret into its field (once, at load)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for secret, file in SECRET_FILES:
            path = data.get(file)
            if path is None:
                continue
            if data.get(secret) is not None:
                raise ValueError(f"set security.{secret} or security.{file}, not both")
            data[secret] = _read_secret(Path(path), file)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> "SecuritySettings":
        for name in ("ssl_ca_file", "ssl_cert_file", "ssl_key_file"):
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"security.{name}: {path} is not a file")
        if (self.ssl_cert_file is None) != (self.ssl_key_file is None):
            raise ValueError("security.ssl_cert_file and security.ssl_key_file go together (a client certificate needs its key)")
        if self.ssl_key_password is not None and self.ssl_key_file is None:
            raise ValueError("security.ssl_key_password is set but security.ssl_key_file is not")
        proto = self.effective_protocol
        if not proto.endswith("SSL") and self.uses_tls_files:
            raise ValueError(f"security.ssl_* files are set but security.protocol is {proto} (use SSL or SASL_SSL)")
        if proto.startswith("SASL") and self.sasl_mechanism is None:
            raise ValueError(f"security.protocol is {proto} but security.sasl_mechanism is not set")
        if self.sasl_mechanism is None:
            stray = [n for n in ("sasl_username", "sasl_password", "oauth_token_url", "oauth_client_id", "oauth_client_secret")
                     if getattr(self, n) is not None]
            if stray:
                raise ValueError(f"security.{stray[0]} is set but security.sasl_mechanism is not")
        elif self.sasl_mechanism in PASSWORD_MECHANISMS:
            missing = [n for n in ("sasl_username", "sasl_password") if getattr(self, n) is None]
            if missing:
                raise ValueError(f"security.sasl_mechanism {self.sasl_mechanism} needs security.{missing[0]}"
                                 f"{' (or sasl_password_file)' if missing[0] == 'sasl_password' else ''}")
        else:  # OAUTHBEARER
            missing = [n for n in ("oauth_token_url", "oauth_client_id", "oauth_client_secret") if getattr(self, n) is None]
            if missing:
                raise ValueError(f"security.sasl_mechanism OAUTHBEARER needs security.{', security.'.join(missing)}")
        return self

    @property
    def uses_tls_files(self) -> bool:
        return any(getattr(self, n) is not None for n in ("ssl_ca_file", "ssl_cert_file", "ssl_key_file"))

    @property
    def effective_protocol(self) -> Protocol:
        """``protocol`` when set, else derived from what else is set (see the class docstring)."""
        if self.protocol is not None:
            return self.protocol
        if self.sasl_mechanism is not None:
            return "SASL_SSL"
        return "SSL" if self.uses_tls_files else "PLAINTEXT"


def _read_secret(path: Path, name: str) -> str:
    try:
        return path.read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"security.{name}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()


def librdkafka_config(sec: SecuritySettings) -> dict[str, Any]:
    """The confluent-kafka (librdkafka) configuration keys for ``sec``; ``{}`` for PLAINTEXT."""
    proto = sec.effective_protocol
    if proto == "PLAINTEXT":
        return {}
    conf: dict[str, Any] = {"security.protocol": proto}
    if proto.endswith("SSL"):
        # "probe": librdkafka looks for the system CA store (the wheel's OpenSSL has no default path)
        conf["ssl.ca.location"] = str(sec.ssl_ca_file) if sec.ssl_ca_file else "probe"
        conf["ssl.endpoint.identification.algorithm"] = "https" if sec.ssl_check_hostname else "none"
        if sec.ssl_cert_file is not None:
            conf["ssl.certificate.location"] = str(sec.ssl_cert_file)
            conf["ssl.key.location"] = str(sec.ssl_key_file)
        if sec.ssl_key_password is not None:
            conf["ssl.key.password"] = _secret(sec.ssl_key_password)
    if sec.sasl_mechanism is not None:
        conf["sasl.mechanism"] = sec.sasl_mechanism
        if sec.sasl_mechanism == "OAUTHBEARER":
            conf.update({
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.token.endpoint.url": sec.oauth_token_url,
                "sasl.oauthbearer.client.id": sec.oauth_client_id,
                "sasl.oauthbearer.client.secret": _secret(sec.oauth_client_secret),
            })
            if sec.oauth_scope:
                conf["sasl.oauthbearer.scope"] = sec.oauth_scope
        else:
            conf["sasl.username"] = sec.sasl_username
            conf["sasl.password"] = _secret(sec.sasl_password)
    return conf


def ssl_context(sec: SecuritySettings) -> ssl.SSLContext | None:
    """The TLS context aiokafka uses (``None`` without TLS): the CA file or the system store,
    the client certificate and key when set, hostname checks as configured.

    Raises:
        ssl.SSLError: a certificate or key that does not parse, or a wrong key password.
    """
    if not sec.effective_protocol.endswith("SSL"):
        return None
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(sec.ssl_ca_file) if sec.ssl_ca_file else None)
    ctx.check_hostname = sec.ssl_check_hostname
    if sec.ssl_cert_file is not None:
        ctx.load_cert_chain(str(sec.ssl_cert_file), str(sec.ssl_key_file), password=_secret(sec.ssl_key_password))
    return ctx


def faust_credentials(sec: SecuritySettings) -> Any:
    """Faust ``broker_credentials`` for ``sec`` (``None`` for PLAINTEXT): ``SSLCredentials``,
    ``SASLCredentials`` (PLAIN, SCRAM) or ``OAuthCredentials`` (OAUTHBEARER), each carrying
    :func:`ssl_context` when the protocol uses TLS."""
    from faust.auth import OAuthCredentials, SASLCredentials, SSLCredentials

    proto = sec.effective_protocol
    ctx = ssl_context(sec)
    if proto == "PLAINTEXT":
        return None
    if proto == "SSL":
        return SSLCredentials(ctx)
    if sec.sasl_mechanism == "OAUTHBEARER":
        return OAuthCredentials(oauth_cb=OIDCTokenProvider(sec), ssl_context=ctx)
    return SASLCredentials(
        username=sec.sasl_username, password=_secret(sec.sasl_password), ssl_context=ctx, mechanism=sec.sasl_mechanism,
    )


class OIDCTokenProvider(AbstractTokenProvider):
    """aiokafka token provider for OAUTHBEARER: the OIDC client-credentials grant (RFC 6749 §4.4)
    against ``oauth_token_url``, cached until 60 s before ``expires_in`` (seconds).

    Raises:
        httpx.HTTPError: the token endpoint is unreachable or refuses the client.
    """

    def __init__(self, sec: SecuritySettings, refresh_margin_s: float = 60.0, transport: Any = None) -> None:
        self._sec = sec
        self._margin_s = refresh_margin_s
        self._transport = transport  # an httpx transport (tests: httpx.MockTransport)
        self._token: str | None = None
        self._expires_at = 0.0  # time.monotonic() seconds

    async def token(self) -> str:
        import httpx

        if self._token is not None and time.monotonic() < self._expires_at:
            return self._token
        form = {"grant_type": "client_credentials"}
        if self._sec.oauth_scope:
            form["scope"] = self._sec.oauth_scope
        async with httpx.AsyncClient(timeout=10.0, transport=self._transport) as http:
            resp = await http.post(
                str(self._sec.oauth_token_url), data=form,
                auth=(str(self._sec.oauth_client_id), _secret(self._sec.oauth_client_secret) or ""),
            )
            resp.raise_for_status()
            body = resp.json()
        self._token = str(body["access_token"])
        self._expires_at = time.monotonic() + max(0.0, float(body.get("expires_in", 300)) - self._margin_s)
        return self._token

    def __repr__(self) -> str:  # never the secret
        return f"<OIDCTokenProvider client_id={self._sec.oauth_client_id} url={self._sec.oauth_token_url}>"
