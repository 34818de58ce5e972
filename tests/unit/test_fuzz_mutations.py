"""The fuzz generator (tools/fuzz/mutations.py): deterministic for a seed, every kind
produced, and its idea of which request id is readable agrees with the codec's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from rtaudit.schemas.codec import readable_fields
from rtaudit.tools.fuzz.mutations import KINDS, MUTATIONS, WEIGHTS, generate, is_valid_id, media_uris

NOW_MS = 1_700_000_000_000
ROOT = Path("/srv/fuzz-media")


@pytest.fixture(scope="module")
def cases():
    return generate(seed=7, count=3000, now_ms=NOW_MS, file_root=ROOT, tag="u")


def test_same_seed_same_cases():
    assert generate(3, 400, NOW_MS, ROOT, "t") == generate(3, 400, NOW_MS, ROOT, "t")


def test_another_seed_other_cases():
    a, b = generate(3, 400, NOW_MS, ROOT, "t"), generate(4, 400, NOW_MS, ROOT, "t")
    assert [c.value for c in a] != [c.value for c in b]


def test_every_kind_is_produced_even_in_a_small_run():
    assert set(KINDS) == set(MUTATIONS) == set(WEIGHTS)
    small = generate(0, len(KINDS), NOW_MS, ROOT)
    assert Counter(c.kind for c in small) == Counter(KINDS)


def test_kinds_follow_their_weights(cases):
    counts = Counter(c.kind for c in cases)
    assert set(counts) == set(KINDS)
    assert counts["media_uri"] > counts["valid"] > counts["megabyte_string"]


def test_ids_are_unique_and_carried(cases):
    ids = [rid for c in cases for rid in c.ids]
    assert len(ids) == len(set(ids))
    assert all(c.verdict_id is None or c.verdict_id in c.ids for c in cases)
    assert [c.index for c in cases] == list(range(len(cases)))


def test_readable_id_agrees_with_the_codec(cases):
    """What the generator says a verdict must come back under is what the router can read."""
    wrong = [(c.kind, c.detail, readable_fields(c.value, c.key).get("request_id"), c.verdict_id)
             for c in cases if readable_fields(c.value, c.key).get("request_id") != c.verdict_id]
    assert wrong == []


def test_the_mutations_reach_their_targets(cases):
    by_kind: dict[str, list] = {}
    for c in cases:
        by_kind.setdefault(c.kind, []).append(c)
    assert any(len(c.value) >= 1 << 20 or (c.key and len(c.key) >= 1 << 20) for c in by_kind["megabyte_string"])
    assert any(c.value.count(b"[") >= 10_000 or c.value.count(b'{"a":') >= 10_000 for c in by_kind["deep_nesting"])
    assert any(rb"\ud800" in c.value for c in by_kind["lone_surrogate"])
    assert all(_not_utf8(c.value) or _not_utf8(c.key) for c in by_kind["invalid_utf8"])
    assert any(c.key is None for c in by_kind["null_key"])
    assert any(c.value == b"" for c in by_kind["empty_value"])
    assert any(c.key and c.verdict_id and c.key.decode() != c.verdict_id for c in by_kind["id_mismatch"])
    for c in by_kind["valid"]:
        assert c.verdict_id == c.ids[0] and orjson.loads(c.value)["request_id"] == c.verdict_id


def test_media_uris_cover_every_scheme_and_trick():
    uris = media_uris(ROOT)
    schemes = {u.split(":", 1)[0].lower() for u in uris if ":" in u}
    assert {"file", "http", "https", "ftp", "data", "gopher", "javascript", "unix", "http+unix"} <= schemes
    for trick in ("..", "%2e%2e", "escape-link", "::ffff:127.0.0.1", "169.254.169.254", "localhost", "%00", "@127.0.0.1"):
        assert any(trick in u for u in uris), trick


def test_is_valid_id_matches_the_contract():
    assert is_valid_id("a") and is_valid_id("A.b_c:d-9") and is_valid_id("x" * 128)
    for bad in ("", "x" * 129, "a b", "é", "a/b", None, 5, "\ud800"):
        assert not is_valid_id(bad)


def _not_utf8(raw: bytes | None) -> bool:
    if raw is None:
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False
