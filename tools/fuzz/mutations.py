"""Fuzz cases for ``audit.requests``: records mutated from valid requests, reproducible
from a seed. Pure (no Kafka, no clock, no network): :func:`generate` is a function of
``(seed, count, now_ms, tag, file_root)``.

Each :class:`Case` is one record (``key``, ``value`` bytes) with the id a verdict must come
back under (``verdict_id``): the value's ``request_id`` while the value still parses as
JSON and that id is valid per the contract, else the record key when it is a valid id,
else ``None`` (then only a DLQ record can answer it). The generator decides this from what
it did, not by asking the codec, so a unit test can hold the two against each other.

JSON parsing follows orjson's rules, as the router does: invalid UTF-8, a lone
surrogate escape (``"\\ud800"``), a number that overflows a double, nesting deeper than
1024 and a byte-order mark make the whole value "not JSON".

Time fields (``created_at_ms``, ``slo_ms``, ``deadline_ms``) are mutated on text-only
requests: a valid deadline years ahead on an image request would wait for an image
worker, and the fuzz fleet runs only the router, the text worker and fusion.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Each mutation kind, with its relative weight in a run. ``megabyte_string`` is rare on
#: purpose: each one costs the embedded broker about 3 MB (request + DLQ original).
WEIGHTS: dict[str, float] = {
    "valid": 1.0,
    "wrong_type": 1.0,
    "missing_field": 1.0,
    "extra_field": 1.0,
    "null_value": 1.0,
    "huge_number": 1.0,
    "deep_nesting": 0.5,
    "invalid_utf8": 1.0,
    "lone_surrogate": 1.0,
    "megabyte_string": 0.1,
    "empty_value": 1.0,
    "null_key": 1.0,
    "id_mismatch": 1.0,
    "wrong_content_type": 1.0,
    "media_uri": 2.0,
    "base64_garbage": 1.0,
    "truncated": 1.0,
}
KINDS: tuple[str, ...] = tuple(WEIGHTS)

TENANT = "fuzz"
#: orjson's nesting limit: deeper documents are not JSON to the router.
JSON_MAX_DEPTH = 1024
_HOLE = "@@fuzz-hole@@"
#: 1x1 white PNG.
TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4//8/AAX+Av4N70a4AAAAAElFTkSuQmCC"
)
_WORDS = ("a", "quiet", "cat", "reads", "the", "weather", "report", "on", "tuesday", "and", "smiles", "at", "noon")


@dataclass(frozen=True)
class Case:
    """One fuzz record.

    Attributes:
        index: position in the run (0-based).
        kind: the mutation kind (one of :data:`KINDS`).
        detail: what exactly was done, short (``"created_at_ms=1e30"``).
        key: record key bytes, ``None`` for a null key.
        value: record value bytes.
        verdict_id: the request id the fleet must answer under with a verdict; ``None``
            when no id is readable (then a DLQ record is the answer).
        ids: every request id this case carries (value, key, decoys), to attribute verdicts.
    """

    index: int
    kind: str
    detail: str
    key: bytes | None
    value: bytes
    verdict_id: str | None
    ids: tuple[str, ...]


@dataclass
class _Draft:
    """A case being built: the request as a dict, holes spliced in as raw bytes at the end."""

    rid: str
    body: dict[str, Any]
    key: bytes | None
    detail: str = ""
    raw: bytes | None = None  # the whole value, when a mutation replaced it
    holes: dict[str, bytes] | None = None
    value_id_readable: bool = True
    extra_ids: tuple[str, ...] = ()

    def splice(self, where: dict[str, Any], name: str, raw: bytes) -> None:
        """Put ``raw`` bytes, as they are, in place of ``where[name]``."""
        token = f"{_HOLE}{len(self.holes or {})}"
        self.holes = {**(self.holes or {}), token: raw}
        where[name] = token

    def encode(self) -> bytes:
        if self.raw is not None:
            return self.raw
        out = json.dumps(self.body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        for token, raw in (self.holes or {}).items():
            out = out.replace(json.dumps(token).encode(), raw)
        return out


def is_valid_id(value: object) -> bool:
    """The contract's ``RequestId`` (1-128 of ``[A-Za-z0-9._:-]``), checked independently of pydantic."""
    return (isinstance(value, str) and 1 <= len(value) <= 128
            and all(c.isascii() and (c.isalnum() or c in "._:-") for c in value))


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 12)))


def _base(rng: random.Random, rid: str, now_ms: int, file_root: Path, text_only: bool) -> _Draft:
    body: dict[str, Any] = {"request_id": rid, "tenant_id": TENANT, "created_at_ms": now_ms, "text": _text(rng)}
    shape = "text" if text_only else rng.choice(("text", "text", "image", "file", "full"))
    if shape == "image":
        body["media"] = [{"type": "image", "data_b64": base64.b64encode(TINY_PNG).decode(), "mime": "image/png", "name": "a.png"}]
        if rng.random() < 0.5:
            del body["text"]
    elif shape == "file":
        body["media"] = [{"type": "image", "uri": (file_root / "tiny.png").as_uri()}]
    elif shape == "full":
        body.update(priority=rng.choice(("high", "normal", "low")), slo_ms=rng.choice((500, 3000, 10_000)),
                    metadata={"source": "fuzz", "n": rng.randint(0, 99), "ok": True, "w": 0.5})
    return _Draft(rid=rid, body=body, key=rid.encode())


# ------------------------------------------------------------------ mutations
# Each takes (rng, draft, ctx) and edits the draft in place; ``detail`` says what it did.

_WRONG_VALUES: tuple[Any, ...] = (0, -1, 1.5, True, None, "", "x", [], [1, "a"], {}, {"a": 1})


def _m_valid(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    d.detail = "unchanged"


def _m_wrong_type(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    name = rng.choice(sorted(d.body))
    current = d.body[name]
    choices = [v for v in _WRONG_VALUES if type(v) is not type(current)]
    if name == "media":
        # inside a media item, or the list itself
        if rng.random() < 0.5:
            item = d.body["media"][0]
            field_name = rng.choice(sorted(item))
            item[field_name] = rng.choice([v for v in _WRONG_VALUES if type(v) is not type(item[field_name])])
            d.detail = f"media[0].{field_name}={item[field_name]!r}"
            return
        d.body["media"] = rng.choice(("image", 5, {"type": "image"}, [None], [[1]]))
        d.detail = f"media={d.body['media']!r}"
        return
    d.body[name] = rng.choice(choices)
    d.detail = f"{name}={d.body[name]!r}"[:80]
    if name == "request_id":
        d.value_id_readable = False


def _m_missing_field(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    name = rng.choice(("request_id", "tenant_id", "created_at_ms", "content", "media field", "all"))
    if name == "all":
        d.body = {}
    elif name == "content":
        d.body.pop("text", None)
        d.body.pop("media", None)
    elif name == "media field" and "media" in d.body:
        dropped = rng.choice(sorted(d.body["media"][0]))
        del d.body["media"][0][dropped]
        name = f"media[0].{dropped}"
    elif name == "media field":
        name = "media (it had none: unchanged)"
    else:
        del d.body[name]
    d.detail = f"without {name}"
    if name in ("request_id", "all"):
        d.value_id_readable = False


def _m_extra_field(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    name = rng.choice(("extra", "__proto__", "", "x" * 300, "Request_ID", "kind", "constructor", "ñ"))
    where = d.body
    if "media" in d.body and rng.random() < 0.4:
        where = d.body["media"][0]
    where[name] = rng.choice(("x", 1, None, [], {"nested": True}))
    d.detail = f"extra {name[:20]!r}{' in media[0]' if where is not d.body else ''}"


def _m_null_value(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    name = rng.choice(sorted(d.body) + ["metadata"])
    if name == "metadata":
        d.body["metadata"] = {"k": None, "": None, "n": [None]}
    else:
        d.body[name] = None
    d.detail = f"{name}=null"
    if name == "request_id":
        d.value_id_readable = False


_HUGE: tuple[tuple[str, bytes, bool], ...] = (
    # (literal, JSON bytes, still JSON to orjson)
    ("1e30", b"1" + b"0" * 30, True),
    ("2^63", str(2**63).encode(), True),
    ("2^64", str(2**64).encode(), True),
    ("-2^63", str(-(2**63)).encode(), True),
    ("1e308", b"1e308", True),
    ("-1", b"-1", True),
    ("10^14+1", str(10**14 + 1).encode(), True),
    ("10^14", str(10**14).encode(), True),
    ("1.5", b"1.5", True),
    ("-0.0", b"-0.0", True),
    ("1e400", b"1e400", False),
    ("10^400", b"1" + b"0" * 400, False),
    ("NaN", b"NaN", False),
    ("Infinity", b"Infinity", False),
)


def _m_huge_number(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    name = rng.choice(("created_at_ms", "slo_ms", "deadline_ms", "metadata", "request_id"))
    label, raw, is_json = rng.choice(_HUGE)
    if name == "metadata":
        d.body["metadata"] = {}
        d.splice(d.body["metadata"], "n", raw)
    else:
        d.splice(d.body, name, raw)
    d.detail = f"{name}={label}"
    if not is_json or name == "request_id":
        d.value_id_readable = False


def _m_deep_nesting(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    depth = rng.choice((10, 500, 1020, 1100, 10_000))
    opener, closer = rng.choice(((b"[", b"]"), (b'{"a":', b"}")))
    name = rng.choice(("metadata", "nested", "text", "media"))
    d.splice(d.body, name, opener * depth + b"1" + closer * depth)
    d.detail = f"{name} nested {depth} deep"
    if depth + 1 > JSON_MAX_DEPTH:
        d.value_id_readable = False


_BAD_UTF8 = (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\xf8\x88\x80\x80\x80", b"\x80", b"\xf4\x90\x80\x80")


def _m_invalid_utf8(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    bad = rng.choice(_BAD_UTF8)
    name = rng.choice(("text", "tenant_id", "request_id", "key"))
    if name == "key":
        d.key = (d.rid.encode() + bad)
        d.detail = f"key with {bad!r}"
        return
    d.splice(d.body, name, b'"ok' + bad + b'ok"')
    d.detail = f"{name} with {bad!r}"
    d.value_id_readable = False


def _m_lone_surrogate(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    esc = rng.choice((rb"\ud800", rb"\udfff", rb"\udc00\ud800", rb"x\ud83d"))
    name = rng.choice(("text", "tenant_id", "request_id", "metadata"))
    if name == "metadata":
        d.body["metadata"] = {}
        d.splice(d.body["metadata"], "k", b'"' + esc + b'"')
    else:
        d.splice(d.body, name, b'"' + esc + b'"')
    d.detail = f"{name}=\"{esc.decode()}\""
    d.value_id_readable = False


def _m_megabyte_string(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    size = rng.choice((1 << 20, (1 << 20) + 1, 2 << 20))
    name = rng.choice(("text", "request_id", "tenant_id", "metadata", "key"))
    blob = rng.choice("aé€𝄞 ") * (size // 4)
    if name == "key":
        d.key = blob.encode()
    elif name == "metadata":
        d.body["metadata"] = {"big": blob}
    else:
        d.body[name] = blob
    d.detail = f"{name} of {len(blob.encode())} bytes"
    if name == "request_id":
        d.value_id_readable = False


def _m_empty_value(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    choice = rng.choice(("b''", "{}", "null", "[]", '""', "0", "text=''", "media=[]+no text", "ws"))
    raw = {"b''": b"", "{}": b"{}", "null": b"null", "[]": b"[]", '""': b'""', "0": b"0", "ws": b" \n\t "}.get(choice)
    if raw is not None:
        d.raw = raw
        d.value_id_readable = False
    elif choice == "text=''":
        d.body["text"] = ""
        d.body.pop("media", None)
    else:
        d.body.pop("text", None)
        d.body["media"] = []
    d.detail = choice


def _m_null_key(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    d.key = rng.choice((None, b"", b"\x00", b"\xff\xfe", b"not a valid id!"))
    then = rng.choice(("valid value", "bad value", "empty value"))
    if then == "bad value":
        d.body["created_at_ms"] = "yesterday"
    elif then == "empty value":
        d.raw = b""
        d.value_id_readable = False
    d.detail = f"key={d.key!r}, {then}"


def _m_id_mismatch(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    other = f"{d.rid}-k"
    d.extra_ids = (other,)
    d.key = other.encode()
    then = rng.choice(("valid value", "bad value", "unreadable value id", "duplicate request_id"))
    if then == "bad value":
        d.body["tenant_id"] = "not a tenant!"
    elif then == "unreadable value id":
        d.body["request_id"] = "bad id with spaces"
        d.value_id_readable = False
    elif then == "duplicate request_id":
        # two request_id members: orjson (and the stdlib) keep the last one
        last = f"{d.rid}-v"
        d.extra_ids = (other, last)
        d.raw = d.encode().replace(b"{", b'{"request_id":"' + other.encode() + b'",', 1)
        d.raw = d.raw.replace(b'"request_id":"' + d.rid.encode() + b'"', b'"request_id":"' + last.encode() + b'"')
        d.detail = f"key={other}, value ids {other} then {last}"
        d.rid = last
        return
    d.detail = f"key={other}, {then}"


_CONTENT: tuple[tuple[str, bytes], ...] = (
    ("xml", b'<?xml version="1.0"?><request><request_id>x</request_id></request>'),
    ("csv", b"request_id,tenant_id,text\nx,fuzz,hello\n"),
    ("form", b"request_id=x&tenant_id=fuzz&text=hello"),
    ("plain text", b"hello, is this the moderation service?"),
    ("gzip", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xcbH\xcd\xc9\xc9\x07\x00\x86\xa6\x106\x05\x00\x00\x00"),
    ("msgpack", b"\x82\xaarequest_id\xa1x\xa4text\xa5hello"),
    ("protobuf", b"\x0a\x01x\x12\x04fuzz\x1a\x05hello"),
    ("png", TINY_PNG),
    ("utf-16 json", '{"request_id":"x"}'.encode("utf-16")),
    ("bom json", b"\xef\xbb\xbf{}"),
    ("ndjson", b"{}\n{}\n"),
    ("json5", b"{request_id: 'x', /* c */}"),
)


def _m_wrong_content_type(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    if rng.random() < 0.6:
        label, raw = rng.choice(_CONTENT)
        d.raw = raw
        d.value_id_readable = False
        d.detail = label
        return
    item: dict[str, Any] = {"type": rng.choice(("image", "audio", "video", "pdf", "IMAGE", "text")),
                            "data_b64": base64.b64encode(rng.choice((TINY_PNG, b"%PDF-1.4", b"<html></html>", b"RIFF\x00"))).decode()}
    item["mime"] = rng.choice(("text/html", "application/pdf", "image/png", "x" * 200, "", "image/svg+xml"))
    d.body["media"] = [item]
    d.detail = f"media type {item['type']} mime {item['mime'][:20]!r}"


def media_uris(file_root: Path) -> tuple[str, ...]:
    """URIs of every scheme and trick the router must refuse or contain (``file_root`` is
    the fuzz fleet's one allowed file root, holding ``tiny.png`` and a symlink out)."""
    root = file_root.as_posix().rstrip("/")
    return (
        f"file://{root}/tiny.png", f"file://localhost{root}/tiny.png", f"file://{root}/missing.png",
        f"file://{root}/../../etc/passwd", f"file://{root}/%2e%2e/%2e%2e/etc/passwd", f"file://{root}/escape-link",
        f"file://{root}/dir-link/passwd", f"file://{root}/tiny.png%00.txt", f"file://{root}/", "file:///etc/passwd",
        "file:///dev/zero", "file:///proc/self/environ", "file://fileserver/share/a.png", "file:relative.png", "file:",
        "http://127.0.0.1/a.png", "http://localhost/a.png", "http://[::1]/a.png", "http://[::ffff:127.0.0.1]/a.png",
        "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/a.png", "http://192.168.1.1:8080/a.png",
        "http://0.0.0.0/", "http://2130706433/", "http://0x7f.1/", "http://127.1/", "https://[fe80::1%25eth0]/a.png",
        "http://media.example.com@127.0.0.1/a.png", "http://user:pass@media.example.com/a.png", "http://[::1/a.png",
        "http://media.example.com:99999/a.png", "http://media.example.com:-1/", "http://", "https://%zz/",
        "http://media.example.com\\@127.0.0.1/", "http://MEDIA.EXAMPLE.COM./a.png", "https://media.example.com/a.png",
        "ftp://media.example.com/a.png", "data:image/png;base64,iVBORw0KGgo=", "gopher://127.0.0.1:6379/_INFO",
        "javascript:alert(1)", "unix:///var/run/docker.sock", "http+unix://%2Fvar%2Frun%2Fdocker.sock/info",
        "/var/run/docker.sock", "jar:file:///a.zip!/a.png", "dict://127.0.0.1:11211/", "ldap://127.0.0.1/",
        "s3://bucket/a.png", "", " http://media.example.com/a.png", "http://media.example.com/" + "a" * 3000,
        "http://media.example.com/\r\nX-Injected: 1", "HTTP://MEDIA.EXAMPLE.COM/a.png",
    )


def _m_media_uri(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    uri = rng.choice(ctx["uris"])
    d.body["media"] = [{"type": rng.choice(("image", "image", "audio", "video")), "uri": uri}]
    if rng.random() < 0.2:
        d.body["media"][0]["data_b64"] = base64.b64encode(TINY_PNG).decode()  # both sources
    d.detail = f"uri {uri[:60]!r}"


def _m_base64_garbage(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    blob = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
    choice = rng.choice(("not base64", "bad padding", "urlsafe", "whitespace", "random bytes", "truncated png",
                         "empty", "unicode", "huge declared"))
    data = {
        "not base64": "!!!not*base64$$$",
        "bad padding": base64.b64encode(TINY_PNG).decode().rstrip("=") + "=",
        "urlsafe": base64.urlsafe_b64encode(b"\xfb\xff" * 8).decode(),
        "whitespace": "iVBO Rw0K\nGgo=",
        "random bytes": base64.b64encode(blob).decode(),
        "truncated png": base64.b64encode(TINY_PNG[: len(TINY_PNG) // 2]).decode(),
        "empty": "",
        "unicode": "aGVsbG8=é",
        "huge declared": "A" * 64 + "=" * 3,
    }[choice]
    d.body["media"] = [{"type": "image", "data_b64": data}]
    d.detail = choice


def _m_truncated(rng: random.Random, d: _Draft, ctx: dict[str, Any]) -> None:
    full = d.encode()
    cut = rng.randint(1, len(full) - 1)
    d.raw = full[:cut]
    d.value_id_readable = False
    d.detail = f"cut at {cut} of {len(full)} bytes"


MUTATIONS: dict[str, Callable[[random.Random, _Draft, dict[str, Any]], None]] = {
    "valid": _m_valid, "wrong_type": _m_wrong_type, "missing_field": _m_missing_field,
    "extra_field": _m_extra_field, "null_value": _m_null_value, "huge_number": _m_huge_number,
    "deep_nesting": _m_deep_nesting, "invalid_utf8": _m_invalid_utf8, "lone_surrogate": _m_lone_surrogate,
    "megabyte_string": _m_megabyte_string, "empty_value": _m_empty_value, "null_key": _m_null_key,
    "id_mismatch": _m_id_mismatch, "wrong_content_type": _m_wrong_content_type, "media_uri": _m_media_uri,
    "base64_garbage": _m_base64_garbage, "truncated": _m_truncated,
}
#: kinds that may take a request with media as their base (the others mutate text-only requests).
_ANY_BASE = frozenset({"valid", "wrong_type", "missing_field", "extra_field", "null_value", "invalid_utf8",
                       "lone_surrogate", "null_key", "id_mismatch", "truncated"})


def kind_sequence(count: int, rng: random.Random) -> list[str]:
    """``count`` kinds: every kind at least once when ``count >= len(KINDS)``, the rest drawn by :data:`WEIGHTS`."""
    kinds = list(KINDS) if count >= len(KINDS) else []
    kinds += rng.choices(KINDS, weights=[WEIGHTS[k] for k in KINDS], k=count - len(kinds))
    rng.shuffle(kinds)
    return kinds


def generate(seed: int, count: int, now_ms: int, file_root: Path, tag: str = "") -> list[Case]:
    """``count`` cases, the same for the same arguments. Request ids are ``fz<tag>-<index>``
    (plus ``-k``/``-v`` decoys in ``id_mismatch``): unique within a run, and across runs
    when ``tag`` differs. ``now_ms`` becomes the valid ``created_at_ms``."""
    rng = random.Random(seed)
    ctx = {"uris": media_uris(file_root)}
    cases = []
    for index, kind in enumerate(kind_sequence(count, rng)):
        rid = f"fz{tag}-{index}"
        draft = _base(rng, rid, now_ms, file_root, text_only=kind not in _ANY_BASE)
        MUTATIONS[kind](rng, draft, ctx)
        value = draft.encode()
        intact = draft.raw is not None or draft.body.get("request_id") == draft.rid
        value_id = draft.rid if draft.value_id_readable and intact and is_valid_id(draft.rid) else None
        key_id = _key_id(draft.key)
        cases.append(Case(
            index=index, kind=kind, detail=draft.detail, key=draft.key, value=value,
            verdict_id=value_id or key_id, ids=tuple(dict.fromkeys((rid, draft.rid, *draft.extra_ids))),
        ))
    return cases


def _key_id(key: bytes | None) -> str | None:
    if not key:
        return None
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if is_valid_id(text) else None
