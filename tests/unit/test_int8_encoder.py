"""The int8 MiniLM encoder (issue 11 item 4): built from the wheel's fp32 export with onnxruntime's
quantization tools, close to fp32, selected by ``text_encoder_precision``, named in the model version."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from rtaudit.engine.text import encoder as E
from rtaudit.engine.text import encoder_build as EB

from rtaudit.engine.text import encoder_delta as ED

TEXTS = [
    "have a nice day",
    "you are such an idiot, seriously",
    "thanks for sharing, this recipe worked great for my family",
    "go back to where you came from, nobody wants you here",
    "the meeting moved to 3pm on thursday",
    "shut up you worthless piece of trash",
    "lol",
]
#: least cosine(int8, fp32) over TEXTS: measured 0.966 ("lol": 3 word pieces; the others 0.978-0.992,
#: mean 0.983) with ``bertfuse-s8pc7-v1``, and 0.975 over 256 dev tweets; ``matmulgather-s8pc7-v2``: 0.975 min
#: over 600 dev texts. A margin below that, far
#: above the cosine between different sentences here (-0.06 to 0.35).
MIN_COSINE = 0.95


@pytest.fixture(scope="module")
def encoders() -> dict[str, E.MiniLMEncoder]:
    return {p: E.MiniLMEncoder(prefer_gpu=False, intra_op_threads=1, precision=p) for p in EB.PRECISIONS}


def test_the_int8_graph_builds_from_the_wheels_export_and_loads(tmp_path):
    dest = EB.quantize_encoder_onnx(tmp_path / "int8.onnx", source=EB.ensure_encoder_onnx("fp32"))
    assert [p.name for p in tmp_path.iterdir()] == ["int8.onnx"]  # no temporary left behind
    model = onnx.load(str(dest))
    ops = {n.op_type for n in model.graph.node}
    assert "MatMulInteger" in ops and "DynamicQuantizeLinear" in ops, ops  # quantized kernels, not fp32 MatMuls
    weights = {i.name for i in model.graph.initializer}
    # every MatMul left is activation x activation (attention scores and their mix), none has a weight
    assert not [n.name for n in model.graph.node if n.op_type == "MatMul" and weights & set(n.input)]
    assert dest.stat().st_size < EB.onnx_path("fp32").stat().st_size / 3
    sess = ort.InferenceSession(str(dest), providers=["CPUExecutionProvider"])
    assert [o.name for o in sess.get_outputs()] == ["embedding", "hidden"]
    ids = np.array([[101, 7592, 2088, 102, 0]], dtype=np.int64)
    mask = np.array([[1, 1, 1, 1, 0]], dtype=np.int64)
    emb, hidden = sess.run(None, {"input_ids": ids, "attention_mask": mask})
    assert emb.shape == (1, 384) and hidden.shape == (1, 5, 384)
    assert abs(float(np.linalg.norm(emb)) - 1.0) < 1e-4


def test_the_int8_graph_sits_beside_fp32_keyed_by_source_and_recipe():
    fp32, int8 = EB.onnx_path("fp32"), EB.onnx_path("int8")
    assert fp32.parent == int8.parent == EB.cache_dir()
    assert EB.source_sha256()[:12] in int8.name and EB.INT8_RECIPE in int8.name and int8 != fp32
    with pytest.raises(ValueError):
        EB.onnx_path("int4")


def test_int8_embeddings_are_close_to_fp32(encoders):
    ref, got = encoders["fp32"].encode(TEXTS), encoders["int8"].encode(TEXTS)
    assert got.shape == ref.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
    cos = (got * ref).sum(axis=1)
    assert cos.min() >= MIN_COSINE, cos
    # still a sentence encoder: each text is nearer its own fp32 embedding than any other text's
    assert (np.argmax(got @ ref.T, axis=1) == np.arange(len(TEXTS))).all()
    # the token states the evidence spans are computed from are close too
    _, h32, _ = encoders["fp32"].encode_tokens(TEXTS[:2])
    _, h8, _ = encoders["int8"].encode_tokens(TEXTS[:2])
    for a, b in zip(h32, h8):
        assert a.shape == b.shape
        c = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        assert c.mean() >= MIN_COSINE


def test_the_model_version_names_the_precision(encoders):
    v32, v8 = encoders["fp32"].version, encoders["int8"].version
    assert v32 != v8 and "int8" in v8 and EB.INT8_RECIPE in v8 and "int8" not in v32
    assert encoders["int8"].path == EB.onnx_path("int8") and encoders["fp32"].path == EB.onnx_path("fp32")


def test_the_text_scorer_version_differs_by_precision(text_scorer):
    from rtaudit.engine.text.scoring import TextScorer

    other = "int8" if text_scorer.encoder.precision == "fp32" else "fp32"
    scorer = TextScorer(prefer_gpu=False, encoder_precision=other)
    assert scorer.encoder.precision == other
    assert scorer.version != text_scorer.version and scorer.encoder.version in scorer.version


@pytest.mark.parametrize("value", ["fp32", "int8"])
def test_the_setting_selects_the_graph(monkeypatch, value):
    """The environment reaches the encoder through the settings object only (the engine reads no environment)."""
    from rtaudit.workers.settings import load_settings

    monkeypatch.setenv("RTAUDIT_TEXT_ENCODER_PRECISION", value)
    settings = load_settings()
    assert settings.text_encoder_precision == value
    enc = E.MiniLMEncoder(prefer_gpu=False, intra_op_threads=1, precision=settings.text_encoder_precision)
    assert enc.precision == value and enc.path == EB.onnx_path(value)
    unset = E.MiniLMEncoder(prefer_gpu=False, intra_op_threads=1)  # no precision: auto, whatever the environment says
    assert unset.precision == E.CPU_DEFAULT


def test_the_cache_setting_places_the_graphs(monkeypatch, tmp_path):
    """``RTAUDIT_CACHE`` (the ``cache`` setting) is where the workers' encoder finds its graphs; the engine
    itself reads no environment: without the argument it uses its default folder."""
    from rtaudit.workers.settings import load_settings

    monkeypatch.setenv("RTAUDIT_CACHE", str(tmp_path / "models"))
    cache = load_settings().cache
    assert cache == tmp_path / "models"
    assert EB.onnx_path("int8", cache=cache).parent == tmp_path / "models"
    assert EB.onnx_path("int8").parent == EB.DEFAULT_CACHE
    assert load_settings().stage_options().cache == cache


def test_auto_is_the_cpu_default_on_cpu_and_fp32_on_cuda():
    assert E.resolve_precision(None, on_gpu=False) == E.CPU_DEFAULT
    assert E.resolve_precision("auto", on_gpu=False) == E.CPU_DEFAULT
    assert E.resolve_precision(None, on_gpu=True) == E.GPU_DEFAULT == "fp16"
    assert E.resolve_precision("int8", on_gpu=True) == "int8"  # explicit wins
    assert E.CPU_DEFAULT in EB.PRECISIONS
    with pytest.raises(ValueError):
        E.resolve_precision("int4", on_gpu=False)


def test_an_unknown_precision_setting_is_refused(monkeypatch):
    from rtaudit.workers.settings import SettingsError, load_settings

    monkeypatch.setenv("RTAUDIT_TEXT_ENCODER_PRECISION", "int4")
    with pytest.raises(SettingsError, match="TEXT_ENCODER_PRECISION"):
        load_settings()


def test_build_encoder_command_builds_both_graphs_beside_each_other():
    from typer.testing import CliRunner

    from rtaudit.cli.main import app

    result = CliRunner().invoke(app, ["text", "build-encoder"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # rich may wrap long paths
    delta = ED.EncoderDelta.from_manifest()  # the encoder the shipped head reads (fine-tuned layers, if any)
    fp32, int8 = EB.onnx_path("fp32", delta), EB.onnx_path("int8", delta)
    assert fp32.name in out.replace(" ", "") and int8.name in out.replace(" ", "")
    assert fp32.exists() and int8.exists()
    bad = CliRunner().invoke(app, ["text", "build-encoder", "--precision", "int4"])
    assert bad.exit_code == 2 and "int4" in bad.output


def test_the_text_worker_passes_its_settings_precision(monkeypatch, tmp_path):
    """The Settings object the worker (or ``rtaudit bench --config``) was given decides, not whatever
    file and environment the process would load by default (here: none, so ``auto``)."""
    from rtaudit.workers.settings import Settings
    from rtaudit.workers.text import stage_factory

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RTAUDIT_CONFIG", raising=False)
    monkeypatch.delenv("RTAUDIT_TEXT_ENCODER_PRECISION", raising=False)
    stage = stage_factory(Settings(text_encoder_precision="int8", prefer_gpu=False, inference_threads=1))
    assert stage.scorer.encoder.precision == "int8"
    assert EB.INT8_RECIPE in stage.model.version  # what each partial names as its model


def test_an_int8_embedding_does_not_depend_on_its_batch(encoders):
    # the int8 graph's activation scale is per run; one text per run keeps each embedding its own
    # (in batches of 64, 85 of 2,132 texts changed a decision: E.INT8_ROWS_PER_RUN)
    long_text = " ".join(["this is a long and perfectly ordinary message about the weather"] * 8)
    alone = {t: encoders["int8"].encode([t])[0] for t in TEXTS}
    together = encoders["int8"].encode([long_text, *TEXTS, "🖕🖕🖕 " * 10])
    assert all(np.array_equal(alone[t], together[i + 1]) for i, t in enumerate(TEXTS))
    assert encoders["int8"].rows_per_run == E.INT8_ROWS_PER_RUN == 1
    assert encoders["fp32"].rows_per_run == encoders["fp32"].batch_size


def test_with_two_threads_int8_texts_run_side_by_side_and_stay_their_own(encoders):
    # one text does not spread over intra-op threads: the encoder runs that many texts at once instead
    two = E.MiniLMEncoder(prefer_gpu=False, intra_op_threads=2, precision="int8")
    assert two.parallel_texts == 2
    texts = [" ".join(["a perfectly ordinary message about the weather"] * 6), *TEXTS]
    got = two.encode(texts)
    assert all(np.array_equal(got[i], two.encode([t])[0]) for i, t in enumerate(texts))
    assert np.array_equal(got, encoders["int8"].encode(texts))  # the single-threaded encoder's embeddings
    emb, hidden, _ = two.encode_tokens(texts)
    assert np.array_equal(emb, got) and [h.shape[0] for h in hidden] == [len(i) for i in two.tokenize(texts)]
    assert two._executor()._max_workers == 2
    assert E.MiniLMEncoder(prefer_gpu=False, intra_op_threads=2, precision="fp32")._executor() is None


def test_a_forked_child_gets_its_own_int8_pool(encoders):
    import os

    two = E.MiniLMEncoder(prefer_gpu=False, intra_op_threads=2, precision="int8")
    before = two.encode(TEXTS)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a pool inherited through fork has no threads and would hang here
        import signal

        signal.alarm(60)  # a hung child dies, and the parent reads nothing
        try:
            os.write(write, b"ok" if np.array_equal(two.encode(TEXTS), before) else b"differs")
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 16) == b"ok"


def test_a_lone_surrogate_is_refused_with_a_clear_error_and_the_scorer_replaces_it(encoders, text_scorer):
    """The tokenizer's own error for a surrogate code point is an unexplained ``TypeError``; the encoder names the
    text and the code point, and the public path (``TextScorer.score``) still scores the text."""
    enc = encoders["int8"]
    with pytest.raises(ValueError, match=r"text 1 holds the surrogate code point U\+D83D at 4"):
        enc.encode(["fine", "you \ud83d idiot"])
    scores = text_scorer.score(["you \ud83d idiot"])[0]
    assert scores.scores["offensive"] > 0.5
