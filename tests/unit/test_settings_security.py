"""Real-cluster security settings: validated at load, reaching confluent-kafka's and Faust's
(aiokafka's) configurations from one place, secrets never shown."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest
from faust.auth import OAuthCredentials, SASLCredentials, SSLCredentials
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from rtaudit.workers.app import faust_options
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.security import OIDCTokenProvider, SecuritySettings, librdkafka_config
from rtaudit.workers.settings import Settings, SettingsError, load_settings

SECRET = "s3cr3t-Pa55"


@pytest.fixture()
def no_file(tmp_path, monkeypatch):
    """Settings from the environment only (no rtaudit.toml)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RTAUDIT_CONFIG", raising=False)
    return tmp_path


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory) -> dict[str, Path]:
    """A self-signed CA-less pair made with the openssl CLI: cert, encrypted key, its password."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not found")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-days", "1", "-subj", "/CN=rtaudit-test",
         "-keyout", str(d / "client.key"), "-out", str(d / "client.pem"), "-passout", f"pass:{SECRET}"],
        check=True, capture_output=True,
    )
    (d / "key-password").write_text(SECRET + "\n")
    return {"cert": d / "client.pem", "key": d / "client.key", "password_file": d / "key-password", "ca": d / "client.pem"}


def test_plaintext_by_default_adds_nothing():
    s = Settings()
    assert librdkafka_config(s.security) == {}
    assert "security.protocol" not in producer_config(s)
    assert "broker_credentials" not in faust_options(s, "router")


def test_scram_from_environment_and_password_file_reaches_both_clients(no_file, tls_files, monkeypatch):
    (no_file / "pw").write_text(SECRET + "\n")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka.example.com:9093")
    monkeypatch.setenv("RTAUDIT_SECURITY__SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("RTAUDIT_SECURITY__SASL_USERNAME", "rtaudit")
    monkeypatch.setenv("RTAUDIT_SECURITY__SASL_PASSWORD_FILE", str(no_file / "pw"))
    monkeypatch.setenv("RTAUDIT_SECURITY__SSL_CA_FILE", str(tls_files["ca"]))
    s = load_settings()
    for conf in (producer_config(s), consumer_config(s, group_id="g")):
        assert conf["security.protocol"] == "SASL_SSL"
        assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
        assert (conf["sasl.username"], conf["sasl.password"]) == ("rtaudit", SECRET)  # newline stripped
        assert conf["ssl.ca.location"] == str(tls_files["ca"])
        assert conf["ssl.endpoint.identification.algorithm"] == "https"
    creds = faust_options(s, "fusion")["broker_credentials"]
    assert isinstance(creds, SASLCredentials)
    auth = credentials_to_aiokafka_auth(creds)  # what Faust hands to aiokafka
    assert auth["security_protocol"] == "SASL_SSL"
    assert auth["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (auth["sasl_plain_username"], auth["sasl_plain_password"]) == ("rtaudit", SECRET)
    assert isinstance(auth["ssl_context"], ssl.SSLContext) and auth["ssl_context"].check_hostname
    # never shown
    for text in (repr(s), str(s), repr(s.security), repr(creds), s.model_dump_json()):
        assert SECRET not in text


def test_mutual_tls_with_an_encrypted_key(tls_files):
    sec = SecuritySettings(ssl_ca_file=tls_files["ca"], ssl_cert_file=tls_files["cert"], ssl_key_file=tls_files["key"],
                           ssl_key_password_file=tls_files["password_file"])
    s = Settings(security=sec)
    conf = producer_config(s)
    assert conf["security.protocol"] == "SSL"
    assert conf["ssl.certificate.location"] == str(tls_files["cert"])
    assert conf["ssl.key.location"] == str(tls_files["key"])
    assert conf["ssl.key.password"] == SECRET
    creds = faust_options(s, "text")["broker_credentials"]
    assert isinstance(creds, SSLCredentials)
    assert credentials_to_aiokafka_auth(creds)["security_protocol"] == "SSL"
    assert isinstance(creds.context, ssl.SSLContext)  # the key decrypted with the password


def test_a_wrong_key_password_fails_when_the_tls_context_is_built(tls_files):
    sec = SecuritySettings(ssl_cert_file=tls_files["cert"], ssl_key_file=tls_files["key"], ssl_key_password="wrong")
    with pytest.raises(ssl.SSLError):
        faust_options(Settings(security=sec), "text")


def test_plain_over_tls_without_a_ca_file_uses_the_system_store():
    s = Settings(security={"sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": SECRET})
    assert producer_config(s)["ssl.ca.location"] == "probe"
    assert faust_options(s, "router")["broker_credentials"].mechanism.value == "PLAIN"


def test_sasl_plaintext_has_no_tls():
    s = Settings(security={"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p"})
    conf = producer_config(s)
    assert conf["security.protocol"] == "SASL_PLAINTEXT" and "ssl.ca.location" not in conf
    assert credentials_to_aiokafka_auth(faust_options(s, "router")["broker_credentials"])["ssl_context"] is None


async def test_oauthbearer_reaches_both_clients_and_fetches_a_token(tmp_path):
    (tmp_path / "secret").write_text(SECRET)
    s = Settings(security={"sasl_mechanism": "OAUTHBEARER", "oauth_token_url": "https://idp.example.com/token",
                           "oauth_client_id": "rtaudit", "oauth_client_secret_file": str(tmp_path / "secret"),
                           "oauth_scope": "kafka"})
    conf = consumer_config(s, group_id="g")
    assert conf["sasl.mechanism"] == "OAUTHBEARER" and conf["sasl.oauthbearer.method"] == "oidc"
    assert conf["sasl.oauthbearer.client.secret"] == SECRET
    assert conf["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example.com/token"
    creds = faust_options(s, "fusion")["broker_credentials"]
    assert isinstance(creds, OAuthCredentials) and isinstance(creds.oauth_cb, OIDCTokenProvider)
    assert SECRET not in repr(creds.oauth_cb)

    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200, json={"access_token": "tok-1", "expires_in": 3600})

    provider = OIDCTokenProvider(s.security, transport=httpx.MockTransport(handler))
    assert await provider.token() == "tok-1"
    assert await provider.token() == "tok-1"  # cached
    assert len(calls) == 1
    assert b"grant_type=client_credentials" in calls[0].content and b"scope=kafka" in calls[0].content
    assert calls[0].headers["authorization"].startswith("Basic ")


@pytest.mark.parametrize(("env", "message"), [
    ({"RTAUDIT_SECURITY__SASL_MECHANISM": "SCRAM-SHA-256"}, "SCRAM-SHA-256 needs security.sasl_username"),
    ({"RTAUDIT_SECURITY__SASL_MECHANISM": "PLAIN", "RTAUDIT_SECURITY__SASL_USERNAME": "u"}, "needs security.sasl_password"),
    ({"RTAUDIT_SECURITY__SASL_USERNAME": "u"}, "sasl_username is set but security.sasl_mechanism is not"),
    ({"RTAUDIT_SECURITY__SASL_MECHANISM": "OAUTHBEARER"}, "OAUTHBEARER needs security.oauth_token_url"),
    ({"RTAUDIT_SECURITY__PROTOCOL": "SASL_SSL"}, "sasl_mechanism is not set"),
    ({"RTAUDIT_SECURITY__SSL_CA_FILE": "/nonexistent/ca.pem"}, "ssl_ca_file: /nonexistent/ca.pem is not a file"),
    ({"RTAUDIT_SECURITY__SASL_MECHANISM": "PLAIN", "RTAUDIT_SECURITY__SASL_USERNAME": "u",
      "RTAUDIT_SECURITY__SASL_PASSWORD_FILE": "/nonexistent/pw"}, "cannot read /nonexistent/pw"),
    ({"RTAUDIT_SECURITY__SASL_MECHANISM": "GSSAPI"}, "sasl_mechanism"),
])
def test_bad_combinations_are_clear_errors_at_load(no_file, monkeypatch, env, message):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SettingsError, match=message) as info:
        load_settings()
    assert "environment variable" in str(info.value)


def test_certificate_without_key_and_both_secret_sources_are_errors(tls_files, tmp_path):
    with pytest.raises(ValueError, match="ssl_cert_file and security.ssl_key_file go together"):
        SecuritySettings(ssl_cert_file=tls_files["cert"])
    with pytest.raises(ValueError, match="sasl_password or security.sasl_password_file, not both"):
        SecuritySettings(sasl_mechanism="PLAIN", sasl_username="u", sasl_password="a", sasl_password_file=tls_files["password_file"])
    with pytest.raises(ValueError, match="protocol is PLAINTEXT"):
        SecuritySettings(protocol="PLAINTEXT", ssl_ca_file=tls_files["ca"])


def test_a_secret_in_a_bad_setting_is_not_echoed(no_file, monkeypatch):
    monkeypatch.setenv("RTAUDIT_SECURITY__SASL_PASSWORD", SECRET)  # no mechanism: an error
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert SECRET not in str(info.value)
    assert "RTAUDIT_SECURITY__SASL_PASSWORD" in str(info.value)
