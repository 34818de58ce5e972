"""The e5 heads, their threshold rule, their loader, the romanized-script helpers and the romanized n-gram abuse models'
fit (no data needed: the sets are written here)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rtaudit.engine.hashing import sha256_file
from rtaudit.modelbuild.text import romanized_data as romanized
from rtaudit.modelbuild.text import e5_train
from rtaudit.engine.text.e5_heads import ANY, E5Head, E5Heads, artifacts_dir, head_file
from rtaudit.engine.text.heads import ArtifactError


def test_threshold_flags_at_most_the_allowed_share_of_ordinary_rows() -> None:
    rng = np.random.default_rng(7)
    p = rng.random(1000)
    for fp in (0.0, 0.01, 0.03):
        t = e5_train.threshold_at_fp(p, fp)
        assert (p >= t).mean() <= fp
        # and it is the lowest such: one step lower flags more than allowed (or everything is allowed)
        assert (p >= t - 2e-3).mean() > fp or t <= 1e-4
    assert e5_train.threshold_at_fp(np.array([]), 0.01) == 0.5


def test_head_round_trips_and_puts_its_threshold_at_one_half(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    w = rng.normal(size=384).astype(np.float32)
    t = 0.7
    head = E5Head(w, 0.25, float(np.log(t / (1 - t))))
    emb = rng.normal(size=(5, 384)).astype(np.float32)
    raw = 1 / (1 + np.exp(-(emb @ w + 0.25)))
    np.testing.assert_array_equal(head.predict(emb) >= 0.5, raw >= t)
    head.save(tmp_path / "h.npz")
    again = E5Head.load(tmp_path / "h.npz")
    np.testing.assert_allclose(again.predict(emb), head.predict(emb))


def _bundle(tmp_path, langs=("es", ANY)):  # type: ignore[no-untyped-def]
    d = artifacts_dir(tmp_path)
    d.mkdir(parents=True)
    arts = {}
    for i, lang in enumerate(langs):
        E5Head(np.full(384, i, np.float32), 0.0, 0.0).save(d / head_file(lang))
        arts[head_file(lang)] = {"sha256": sha256_file(d / head_file(lang))}
    (d / "manifest.json").write_text(json.dumps({"version": "v-test", "encoder": "e5s-test", "artifacts": arts}))
    return d


def test_heads_load_verified_and_fall_back_to_the_any_head(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _bundle(tmp_path)
    heads = E5Heads.load(tmp_path)
    assert heads is not None and set(heads.heads) == {"es", ANY} and heads.version == "v-test"
    emb = np.ones((2, 384), np.float32) / np.sqrt(384)
    np.testing.assert_allclose(heads.predict("nl", emb), heads.predict(ANY, emb))
    assert not np.allclose(heads.predict("es", emb), heads.predict(ANY, emb))
    assert heads.router is not None and heads.router.detect(["hello"]) == [None]


def test_a_listed_ngram_model_of_a_romanized_language_is_loaded_and_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rtaudit.engine.text.heads import CharNgramModel
    from rtaudit.engine.text.romanized import ngram_file

    d = _bundle(tmp_path)
    model = CharNgramModel(np.ones(2**10, np.float32), np.zeros(2**10, np.float32), 0.0, 0.0, (1, 4))
    model.save(d / ngram_file("ar_latn"))
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["artifacts"][ngram_file("ar_latn")] = {"sha256": sha256_file(d / ngram_file("ar_latn"))}
    (d / "manifest.json").write_text(json.dumps(manifest))
    heads = E5Heads.load(tmp_path)
    assert heads is not None and set(heads.ngram) == {"ar_latn"}
    np.testing.assert_allclose(heads.ngram["ar_latn"].predict(["ya hmar"]), [0.5])
    assert heads.ngram_alone == frozenset()  # an entry without "combine" (bundles before it): max'ed with the head
    assert E5Heads(heads.heads, "v", "e").ngram == {}  # none by default (bundles before it)
    manifest["artifacts"][ngram_file("ar_latn")]["combine"] = "alone"
    (d / "manifest.json").write_text(json.dumps(manifest))
    assert E5Heads.load(tmp_path).ngram_alone == {"ar_latn"}  # type: ignore[union-attr]
    with open(d / ngram_file("ar_latn"), "ab") as f:
        f.write(b"tampered")
    with pytest.raises(ArtifactError):
        E5Heads.load(tmp_path)


class _Encoder:
    """Stands in for the e5 encoder: records what it is asked to embed; every text embeds to the same unit vector."""

    version = "fake"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.asked += texts
        return np.ones((len(texts), 384), np.float32) / np.sqrt(384)


def test_a_language_its_ngram_model_serves_alone_is_not_embedded_and_gets_the_models_score() -> None:
    from rtaudit.engine.text.e5_stage import MultilingualStage
    from rtaudit.engine.text.heads import CharNgramModel

    n = 2**10
    hot = CharNgramModel(np.ones(n, np.float32), np.zeros(n, np.float32), 3.0, 0.0, (1, 2))  # every text: sigmoid(3)
    cold = CharNgramModel(np.ones(n, np.float32), np.zeros(n, np.float32), -3.0, 0.0, (1, 2))  # every text: sigmoid(-3)
    head = E5Head(np.zeros(384, np.float32), 0.0, 0.0)  # every embedding: 0.5
    heads = E5Heads({ANY: head, "hi_latn": head, "ar_latn": head}, "v", "e", None,
                    {"hi_latn": cold, "ar_latn": cold}, frozenset({"hi_latn"}))
    enc = _Encoder()
    p = MultilingualStage(enc, heads).score(["tu pagal hai", "ya hmar", "je bent"], ["hi_latn", "ar_latn", ANY])  # type: ignore[arg-type]
    np.testing.assert_allclose(p, [1 / (1 + np.exp(3)), 0.5, 0.5])  # alone: the model's score, even below the head's
    assert enc.asked == ["ya hmar", "je bent"]  # the language served alone is not embedded
    heads.ngram["ar_latn"] = hot  # max'ed: the larger wins
    assert MultilingualStage(enc, heads).score(["ya hmar"], ["ar_latn"])[0] == pytest.approx(1 / (1 + np.exp(-3)))  # type: ignore[arg-type]
    enc.asked.clear()
    assert MultilingualStage(enc, heads).score(["tu pagal hai"], ["hi_latn"]).shape == (1,) and enc.asked == []  # type: ignore[arg-type]


def test_a_tampered_head_is_refused_and_a_bundle_without_heads_loads_none(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert E5Heads.load(tmp_path) is None
    d = _bundle(tmp_path)
    E5Head(np.zeros(384, np.float32), 1.0, 0.0).save(d / head_file("es"))
    with pytest.raises(ArtifactError):
        E5Heads.load(tmp_path)


def test_a_bundle_without_the_any_head_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _bundle(tmp_path, langs=("es",))
    with pytest.raises(ArtifactError, match="any_e5_lr.npz"):
        E5Heads.load(tmp_path)


def test_russian_in_latin_letters_is_deterministic_and_latin() -> None:
    text = "Ты полный дурак, заткнись"
    once, twice = romanized.ru_latin(text), romanized.ru_latin(text)
    assert once == twice
    assert romanized.latin_share(once) == 1.0 and "durak" in once.lower()


def test_latin_share_counts_letters_only() -> None:
    assert romanized.latin_share("tum bahut 123 !!") == 1.0
    assert romanized.latin_share("जय मोदीराज") == 0.0
    assert romanized.latin_share("123") == 0.0


def test_romanized_load_refuses_an_unknown_language(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="ar_latn"):
        romanized.load(tmp_path, "fa_latn")


def _arabizi(tmp_path, text: str):  # type: ignore[no-untyped-def]
    d = tmp_path / "arabizi_off"
    d.mkdir(parents=True, exist_ok=True)
    (d / "Arabizi-Off_Lang_Dataset.csv").write_text(text, encoding="utf-8")


def test_arabizi_rows_keep_their_label_and_drop_unknown_labels_and_arabic_script(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _arabizi(tmp_path, "Text,Generic Class,Original class,Source,Dialect\n"
             "ya hmar nta wa7ed kelb,offensive,Abusive,(test),DZ\n"
             "sa7a ftourkom rabi y5alikom,non-offensive,None,(test),DZ\n"
             "sa7a ftourkom rabi y5alikom,non-offensive,None,(test),DZ\n"  # duplicate: kept once
             "kifak ya 5ayye,maybe,None,(test),LB\n"  # unknown label: dropped
             "يا حمار,offensive,Abusive,(test),DZ\n"  # Arabic script: not romanized, dropped
             ",offensive,Abusive,(test),DZ\n")  # empty: dropped
    rows = romanized.load(tmp_path, "ar_latn")
    assert [(r.source, r.language, r.label) for r in rows] == [("arabizi_off", "ar_latn", 1), ("arabizi_off", "ar_latn", 0)]
    assert all(r.split in ("train", "dev", "test") for r in rows)
    # the same text, the same split (the rule every language shares: a hash of source and text)
    assert [r.split for r in rows] == [r.split for r in romanized.load(tmp_path, "ar_latn")]
    assert romanized.missing(tmp_path, "ar_latn") == [tmp_path / "tunizi" / "TUNIZI-Dataset.txt"]
    assert romanized.missing(tmp_path, "hi_latn")


def test_tunizi_positive_comments_are_benign_rows_kept_out_of_the_abuse_rows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _arabizi(tmp_path, "Text,Generic Class,Original class,Source,Dialect\nya hmar nta wa7ed kelb,offensive,Abusive,(test),DZ\n")
    (tmp_path / "tunizi").mkdir()
    (tmp_path / "tunizi" / "TUNIZI-Dataset.txt").write_text(
        "1;rabi yer7mou w ywasa3 3lih\n"
        "%1;merci beaucoup ya sa7bi\n"  # a stray "%" before the label: kept
        "-1;ya wled l7ram\n"  # negative sentiment: dropped (not abuse, but may hold it)
        "1;rabi yer7mou w ywasa3 3lih\n"  # duplicate: kept once
        "1;\n", encoding="utf-8")  # empty: dropped
    assert romanized.missing(tmp_path, "ar_latn") == []
    benign = romanized.benign(tmp_path, "ar_latn")
    assert [(r.source, r.label) for r in benign] == [("tunizi", 0), ("tunizi", 0)]
    assert "merci" in benign[1].text and all(r.split in ("train", "dev", "test") for r in benign)
    assert {r.source for r in romanized.load(tmp_path, "ar_latn")} == {"arabizi_off"}  # never an abuse-set row
    assert romanized.benign(tmp_path, "hi_latn") == []  # no benign source for Hinglish


def test_trac1_reads_its_gold_test_sets_too(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "hinglish_hs").mkdir()
    (tmp_path / "hinglish_hs" / "hate_speech.tsv").write_text("tu gadha hai\tyes\n", encoding="utf-8")
    d = tmp_path / "trac1_hi"
    d.mkdir()
    for name, row in (("agr_hi_train.csv", "t1,abe saale nikal,OAG"), ("agr_hi_dev.csv", "d1,kal milte hain bhai,NAG"),
                      ("agr_hi_fb_gold.csv", "f1,bahut badhiya kaam kiya,NAG"),
                      ("agr_hi_tw_gold.csv", "smh_1,tu pagal hai kya,CAG\nsmh_2,chup kar kamine,OAG")):
        (d / name).write_text(row + "\n", encoding="utf-8")
    rows = romanized.load(tmp_path, "hi_latn")
    assert [(r.source, r.label) for r in rows] == [("hinglish_hs", 1), ("trac1_hi", 1), ("trac1_hi", 0), ("trac1_hi", 0),
                                                   ("trac1_hi", 1)]  # covertly aggressive (CAG) dropped
    (d / "agr_hi_tw_gold.csv").unlink()
    assert romanized.missing(tmp_path, "hi_latn") == [d / "agr_hi_tw_gold.csv"]


def test_arabizi_loader_refuses_a_file_without_its_columns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _arabizi(tmp_path, "text,label\nya hmar,1\n")
    with pytest.raises(ValueError, match="Generic Class"):
        romanized.load(tmp_path, "ar_latn")
    (tmp_path / "arabizi_off" / "Arabizi-Off_Lang_Dataset.csv").unlink()
    with pytest.raises(FileNotFoundError):
        romanized.load(tmp_path, "ar_latn")


def test_ngram_abuse_model_fit_is_deterministic_and_keeps_its_dev_rule(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rtaudit.engine.text.romanized import ngram_file
    from rtaudit.modelbuild.text import romanized_train

    rng = np.random.default_rng(5)
    rude, kind = ["hmar", "kelb", "7mar", "wld l7ram", "ya 9lil"], ["sa7a", "rabi y5alik", "mabrouk", "merci", "bravo"]
    lines = ["Text,Generic Class,Original class,Source,Dialect"]
    for i in range(600):
        abusive = i % 3 == 0
        words = rng.choice(rude if abusive and rng.random() < 0.8 else kind, size=2)
        lines.append(f"{' '.join(words)} {i},{'offensive' if abusive else 'non-offensive'},x,(test),DZ")
    _arabizi(tmp_path, "\n".join(lines) + "\n")
    (tmp_path / "tunizi").mkdir()
    (tmp_path / "tunizi" / "TUNIZI-Dataset.txt").write_text("".join(f"1;sa7a ftourkom {i}\n" for i in range(100)))
    model, report = romanized_train.fit_ngram_head(tmp_path, "ar_latn")
    assert report["dev_neg_fp"] <= romanized_train.NGRAM_NEG_FP_MAX and report["dev_recall"] > 0.5
    assert report["dev_benign_fp"] is not None and set(report["dev_recall_at_neg_fp"]) == {"0.05", "0.10", "0.20"}
    again, _ = romanized_train.fit_ngram_head(tmp_path, "ar_latn")
    model.save(tmp_path / "a.npz")
    again.save(tmp_path / "b.npz")
    assert sha256_file(tmp_path / "a.npz") == sha256_file(tmp_path / "b.npz")  # a refit writes the same bytes
    d = _bundle(tmp_path / "bundle")
    manifest = romanized_train.train_ngram_heads(tmp_path, d, ("ar_latn",))
    assert manifest["artifacts"][ngram_file("ar_latn")]["combine"] == "alone"
    assert manifest["version"] == "v-test+ngram-ar_latn" and {"arabizi_off", "tunizi"} <= set(manifest["datasets"])
    assert romanized_train.train_ngram_heads(tmp_path, d, ("ar_latn",))["version"] == "v-test+ngram-ar_latn"
    heads = E5Heads.load(tmp_path / "bundle")
    assert heads is not None and heads.ngram_alone == {"ar_latn"}
