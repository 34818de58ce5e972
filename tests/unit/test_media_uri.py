"""Media URI security (issue 10.7): loopback, private, link-local and reserved addresses
(IPv6-mapped ones too), names that resolve to them, redirects to them, and ``file://``
URIs with ``..`` or symlinks out of the allowed roots are refused with a reason. The
resolver is monkeypatched and HTTP goes through ``httpx.MockTransport``: no network."""

from __future__ import annotations

import os

import httpx
import pytest

import rtaudit.engine.media as media
from rtaudit.engine.media import MediaPolicy, address_problem, check_uri, fetch_http, load_bytes, read_file
from rtaudit.engine.routing import Router
from rtaudit.engine.policy import PolicyBook, TenantPolicy
from rtaudit.schemas.errors import MediaFetchFailed, MediaTooLarge, URINotAllowed
from rtaudit.schemas.messages import AuditRequest, MediaItem

HOST = "media.example.com"
PUBLIC = "93.184.216.34"
POLICY = MediaPolicy(allowed_http_hosts=(HOST, "other.example.com"), max_bytes=1000)


@pytest.fixture
def dns(monkeypatch):
    """A fake resolver: ``dns[name] = [addresses]``; ``dns.calls`` lists every lookup."""

    class FakeDNS(dict):
        calls: list[str]

    table = FakeDNS({HOST: [PUBLIC], "other.example.com": ["151.101.1.69"]})
    table.calls = []

    def resolve(host: str, port: int) -> list[str]:
        table.calls.append(host)
        if host not in table:
            raise OSError(f"no such host {host}")
        return table[host]

    monkeypatch.setattr(media, "resolve_host", resolve)
    return table


def server(routes: dict[str, httpx.Response], seen: list[httpx.Request] | None = None) -> httpx.MockTransport:
    """Answers by ``Host`` header + path; records every request in ``seen``."""

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return routes.get(request.headers["host"] + request.url.path, httpx.Response(404))

    return httpx.MockTransport(handler)


def redirect(location: str, status: int = 302) -> httpx.Response:
    return httpx.Response(status, headers={"location": location})


# ------------------------------------------------------------------ addresses


@pytest.mark.parametrize("address, problem", [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("fc00::1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
    ("240.0.0.1", "reserved"), ("100.64.0.1", "not globally routable"),
    ("::ffff:127.0.0.1", "loopback (IPv4 127.0.0.1 inside IPv6)"),
    ("::ffff:10.0.0.1", "private (IPv4 10.0.0.1 inside IPv6)"),
    ("::ffff:169.254.169.254", "link-local (IPv4 169.254.169.254 inside IPv6)"),
    ("2002:7f00:1::", "loopback (IPv4 127.0.0.1 inside IPv6)"),
])
def test_non_public_addresses_have_a_named_problem(address, problem):
    import ipaddress

    assert address_problem(ipaddress.ip_address(address)) == problem


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:93.184.216.34"])
def test_public_addresses_have_no_problem(address):
    import ipaddress

    assert address_problem(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("uri", [
    "http://127.0.0.1/a.png", "http://[::1]/a.png", "http://[::ffff:127.0.0.1]/a.png", "http://[::ffff:7f00:1]/a.png",
    "http://10.0.0.1/a.png", "https://192.168.1.1:8443/a.png", "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/a.png", "http://0.0.0.0/", "http://localhost/a.png", "http://LOCALHOST./a.png",
    "http://api.localhost/a.png", "http://[fc00::1]/", "http://100.64.0.1/",
])
def test_address_literals_and_localhost_are_refused_even_when_listed(uri):
    listed = MediaPolicy(allowed_http_hosts=("127.0.0.1", "::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "10.0.0.1",
                                             "192.168.1.1", "169.254.169.254", "fe80::1", "0.0.0.0", "localhost",
                                             "api.localhost", "fc00::1", "100.64.0.1"))
    with pytest.raises(URINotAllowed, match="address"):
        check_uri(uri, listed)


# ------------------------------------------------------------------ names that resolve inside


@pytest.mark.parametrize("addresses", [["127.0.0.1"], ["::1"], ["::ffff:127.0.0.1"], ["10.0.0.5"],
                                       ["169.254.169.254"], [PUBLIC, "127.0.0.1"]])
def test_a_name_resolving_to_a_non_public_address_is_refused(dns, addresses):
    dns[HOST] = addresses
    seen: list[httpx.Request] = []
    with pytest.raises(URINotAllowed, match=f"host {HOST} resolves to"):
        fetch_http(f"http://{HOST}/a.png", POLICY, server({}, seen))
    assert seen == []  # refused before connecting


def test_numeric_host_forms_resolving_to_loopback_are_refused():
    """``2130706433`` and ``127.1`` are 127.0.0.1 to the system resolver (no DNS needed)."""
    for host in ("2130706433", "127.1", "0x7f.1"):
        with pytest.raises(URINotAllowed, match="resolves to 127.0.0.1, a loopback"):
            fetch_http(f"http://{host}/a.png", MediaPolicy(allowed_http_hosts=(host,)), server({}))


def test_the_connection_goes_to_the_address_checked(dns):
    """Resolve once, connect to that address (no second lookup for a rebinding DNS to
    answer), with the name in the Host header and in TLS SNI/certificate checks."""
    seen: list[httpx.Request] = []
    data = load_bytes(MediaItem(type="image", uri=f"https://{HOST}/a.png?sig=1"), POLICY,
                      transport=server({f"{HOST}/a.png": httpx.Response(200, content=b"png")}, seen))
    assert data == b"png"
    (request,) = seen
    assert request.url.host == PUBLIC and request.url.scheme == "https" and request.url.query == b"sig=1"
    assert request.headers["host"] == HOST
    assert request.extensions["sni_hostname"] == HOST
    assert dns.calls == [HOST]


def test_a_non_default_port_stays_in_the_host_header(dns):
    seen: list[httpx.Request] = []
    fetch_http(f"http://{HOST}:8080/a.png", POLICY, server({f"{HOST}:8080/a.png": httpx.Response(200, content=b"x")}, seen))
    assert seen[0].url.port == 8080 and seen[0].headers["host"] == f"{HOST}:8080"


def test_a_name_that_does_not_resolve_is_a_retriable_fetch_failure(dns):
    with pytest.raises(MediaFetchFailed, match="does not resolve") as info:
        fetch_http("http://nowhere.example.com/a.png", MediaPolicy(allowed_http_hosts=("nowhere.example.com",)), server({}))
    assert info.value.retriable


# ------------------------------------------------------------------ redirects, checked per hop


@pytest.mark.parametrize("location, reason", [
    ("http://127.0.0.1/a.png", "loopback"),
    ("http://[::ffff:127.0.0.1]/a.png", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://localhost:8080/", "loopback"),
    ("http://evil.example.net/a.png", "not in the allowed HTTP hosts"),
    ("file:///etc/passwd", "outside the allowed file roots"),
    ("gopher://127.0.0.1:6379/_INFO", "scheme"),
])
def test_redirects_to_refused_targets_are_refused(dns, location, reason):
    seen: list[httpx.Request] = []
    routes = {f"{HOST}/a.png": redirect(location)}
    with pytest.raises(URINotAllowed, match=reason) as info:
        fetch_http(f"http://{HOST}/a.png", POLICY, server(routes, seen))
    assert "redirect 1" in info.value.message
    assert len(seen) == 1  # the refused target was never contacted


def test_a_redirect_to_an_allowed_name_that_resolves_inside_is_refused(dns):
    dns["other.example.com"] = ["10.0.0.7"]
    routes = {f"{HOST}/a.png": redirect("https://other.example.com/b.png", 301)}
    with pytest.raises(URINotAllowed, match="redirect 1 .*resolves to 10.0.0.7, a private address"):
        fetch_http(f"http://{HOST}/a.png", POLICY, server(routes))


def test_allowed_redirects_are_followed_and_resolved_per_hop(dns):
    seen: list[httpx.Request] = []
    routes = {
        f"{HOST}/a.png": redirect("/b.png", 307),
        f"{HOST}/b.png": redirect("https://other.example.com/c.png", 308),
        "other.example.com/c.png": httpx.Response(200, content=b"image"),
    }
    assert fetch_http(f"http://{HOST}/a.png", POLICY, server(routes, seen)) == b"image"
    assert [r.url.host for r in seen] == [PUBLIC, PUBLIC, "151.101.1.69"]
    assert dns.calls == [HOST, HOST, "other.example.com"]


def test_redirect_loops_stop(dns):
    routes = {f"{HOST}/a.png": redirect("/a.png")}
    with pytest.raises(MediaFetchFailed, match=f"more than {media.MAX_REDIRECTS} redirects"):
        fetch_http(f"http://{HOST}/a.png", POLICY, server(routes))


def test_error_statuses_and_sizes(dns):
    with pytest.raises(MediaFetchFailed, match="HTTP 404"):
        fetch_http(f"http://{HOST}/gone.png", POLICY, server({}))
    big = {f"{HOST}/a.png": httpx.Response(200, content=b"x" * 1001)}
    with pytest.raises(MediaTooLarge):
        fetch_http(f"http://{HOST}/a.png", POLICY, server(big))


# ------------------------------------------------------------------ malformed and tricky URIs


@pytest.mark.parametrize("uri, reason", [
    ("http://[::1/a.png", "malformed"),
    (f"http://{HOST}:99999/a.png", "malformed"),
    (f"http://user:pass@{HOST}/a.png", "user info"),
    (f"http://{HOST}@127.0.0.1/a.png", "user info"),
    (f"http://{HOST}\\@127.0.0.1/", "backslash"),
    (f"http://{HOST}/a.png\r\nX-Injected: 1", "control characters"),
    (f" http://{HOST}/a.png", "whitespace"),
    ("http://bücher.example/a.png", "not ASCII"),
    ("http:///a.png", "no host"),
    ("ftp://media.example.com/a.png", "scheme"),
    ("data:image/png;base64,iVBORw0KGgo=", "scheme"),
    ("gopher://127.0.0.1:6379/_INFO", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("unix:///var/run/docker.sock", "scheme"),
    ("http+unix://%2Fvar%2Frun%2Fdocker.sock/info", "scheme"),
    ("/var/run/docker.sock", "scheme"),
    ("jar:file:///a.zip!/a.png", "scheme"),
])
def test_malformed_and_tricky_uris_are_refused_with_a_reason(uri, reason):
    with pytest.raises(URINotAllowed, match=reason):
        check_uri(uri, POLICY)


def test_reasons_never_show_credentials_or_query_strings(dns):
    for uri in (f"http://user:s3cret@{HOST}/a.png?token=SECRET", "http://127.0.0.1/a.png?token=SECRET#frag"):
        with pytest.raises(URINotAllowed) as info:
            check_uri(uri, POLICY)
        assert "SECRET" not in info.value.message and "s3cret" not in info.value.message


def test_the_router_refuses_bad_uris_with_a_typed_error_never_a_crash(tmp_path):
    """These raised ValueError from urlsplit / Path.resolve and killed the router (rtaudit fuzz)."""
    router = Router(policies=PolicyBook(default=TenantPolicy()), media_policy=MediaPolicy(allowed_file_roots=(tmp_path,)))
    for uri in ("http://[::1/a.png", f"file://{tmp_path}/a.png%00.txt", "http://h:99999/"):
        req = AuditRequest(request_id="r", tenant_id="t", created_at_ms=0, media=[MediaItem(type="image", uri=uri)])
        with pytest.raises(URINotAllowed):
            router.plan(req, 0)


# ------------------------------------------------------------------ file://


@pytest.fixture
def root(tmp_path):
    inside = tmp_path / "media"
    (inside / "sub").mkdir(parents=True)
    (inside / "a.png").write_bytes(b"png bytes")
    (tmp_path / "secret.txt").write_bytes(b"secret")
    (inside / "escape-link").symlink_to(tmp_path / "secret.txt")
    (inside / "dir-link").symlink_to(tmp_path)
    (inside / "inner-link").symlink_to(inside / "a.png")
    return inside


def policy_for(root) -> MediaPolicy:
    return MediaPolicy(allowed_file_roots=(root,), max_bytes=1000)


@pytest.mark.parametrize("relative", ["../secret.txt", "sub/../a.png", "sub/../../secret.txt", "%2e%2e/secret.txt",
                                      "sub/%2E%2E/%2e%2e/secret.txt"])
def test_dot_dot_segments_are_refused(root, relative):
    with pytest.raises(URINotAllowed, match=r"'\.\.' segments"):
        check_uri(f"file://{root}/{relative}", policy_for(root))


@pytest.mark.parametrize("name", ["escape-link", "dir-link/secret.txt"])
def test_symlinks_out_of_the_root_are_refused(root, name):
    with pytest.raises(URINotAllowed, match="symlink out of the allowed file roots"):
        read_file(f"file://{root}/{name}", policy_for(root))


def test_a_symlink_inside_the_root_is_read(root):
    assert read_file(f"file://{root}/inner-link", policy_for(root)) == b"png bytes"
    assert read_file(f"file://localhost{root}/a.png", policy_for(root)) == b"png bytes"


def test_a_fifo_or_directory_in_the_root_is_refused_without_blocking(root):
    os.mkfifo(root / "pipe")
    for name in ("pipe", "sub"):
        with pytest.raises(URINotAllowed, match="not a regular file"):
            read_file(f"file://{root}/{name}", policy_for(root))


def test_nul_bytes_relative_paths_and_remote_hosts_are_refused(root):
    for uri, reason in ((f"file://{root}/a.png%00.txt", "NUL"), ("file:a.png", "absolute path"),
                        ("file://fileserver/share/a.png", "remote host")):
        with pytest.raises(URINotAllowed, match=reason):
            check_uri(uri, policy_for(root))


def test_a_file_over_the_limit_is_too_large(root):
    (root / "big.png").write_bytes(b"x" * 1001)
    with pytest.raises(MediaTooLarge):
        read_file(f"file://{root}/big.png", policy_for(root))


def test_a_path_swapped_for_a_symlink_after_the_check_is_refused(root, monkeypatch):
    """Time of check vs time of use: what was opened is judged, not what was checked."""
    policy = policy_for(root)
    monkeypatch.setattr(media, "_allowed_file", lambda uri, policy: root / "escape-link")  # final component
    with pytest.raises(URINotAllowed, match="changed into a symlink"):
        read_file(f"file://{root}/a.png", policy)
    monkeypatch.setattr(media, "_allowed_file", lambda uri, policy: root / "dir-link" / "secret.txt")  # a parent
    with pytest.raises(URINotAllowed, match="changed to lead out of the allowed file roots"):
        read_file(f"file://{root}/a.png", policy)
