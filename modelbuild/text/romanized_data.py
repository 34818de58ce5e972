"""The data of the romanized-script routers and e5 heads (:mod:`rtaudit.engine.text.romanized`): Hindi/Urdu, Russian and Arabic in Latin letters.

lingua does not detect romanized Hindi, Russian or Arabic (all stay on the English route and the English model,
which scored a plain Hinglish insult 0.02). Here:

* **Data** (not in git; ``DIR/<source>/<file>`` under the multilingual data directory, each file
  ``git show <commit>:<path>`` of the repository named in :data:`SOURCES`):

  - ``hinglish_hs``: Bohra et al. 2018, "A Dataset of Hindi-English Code-Mixed Social Media Text for Hate
    Speech Detection" (4,575 tweets, ``yes``/``no`` hate), as copied into victor7246/Hinglish_Hate_Detection
    (repository MIT; the original repository deepanshu1995/HateSpeech-Hindi-English-Code-Mixed-Social-Media-Text
    ships tweet ids only, under GPL-3.0);
  - ``trac1_hi``: TRAC-1 Hindi train + dev (Kumar et al. 2018, Facebook comments; CC BY-NC-SA 4.0) and its two
    gold-labelled test sets (Facebook and Twitter, ``trac-gold-set/agr_hi_{fb,tw}_gold.csv``), the same
    repository: overtly aggressive (``OAG``) = 1, not aggressive (``NAG``) = 0, covertly aggressive dropped;
    only rows whose letters are mostly Latin (the set also holds Devanagari);
  - ``ru_translit``: the Russian rows of :mod:`rtaudit.modelbuild.text.multilingual_data` (abuse and ordinary
    sentences, their labels and their splits) written in Latin letters by ``iuliia`` (MIT), one of
    :data:`RU_SCHEMES` per row (by a hash of the text): informal romanization schemes (Telegram's,
    Moscow metro's, Wikipedia's, Yandex Maps'). No public labelled set of Russian written in Latin letters
    was found; these are real Russian posts and labels in a machine-made spelling;
  - ``arabizi_off``: Arabizi (Arabic in Latin letters and digits: ``3`` = ع, ``7`` = ح, ``9`` = ق), Bensalem, Ait Mout
    and Rosso 2023, "Offensive Language Detection in Arabizi" (ArabicNLP 2023; 7,383 comments and tweets,
    Algerian and Lebanese, merged from four earlier sets), Imene1/Arabizi-offensive-language: ``offensive`` = 1,
    ``non-offensive`` = 0 (its "Generic Class"); only rows whose letters are mostly Latin. No licence is stated
    in the repository (its README asks users to cite the paper): research use, like ``lhsab``.

  - ``tunizi`` (benign, :func:`benign`; not in :func:`load`): TUNIZI, Fourati, Messaoudi and Haddad 2020, "TUNIZI: a
    Tunisian Arabizi sentiment analysis dataset" (AfricaNLP 2020; 3,000 YouTube comments, iCompass),
    chaymafourati/TUNIZI-Sentiment-Analysis-Tunisian-Arabizi-Dataset: its positive comments (``1;``) as everyday
    Arabizi with no abuse annotation, for the benign false-positive rate of the ar_latn models (the negative
    comments are dropped: negative sentiment is not abuse, but may hold it). No licence is stated in the repository
    (its README asks users to cite the paper): research use.

  Splits: ``sha256(f"{SPLIT_SEED}:{source}:{text}")`` as for the other languages (the transliterated rows keep
  their Cyrillic original's split, so a test row is a test row in both scripts).

* **Routing** (:class:`RomanizedRouter`): one character n-gram model per romanized language
  (:class:`~rtaudit.engine.text.heads.CharNgramModel`, one-vs-rest: that language's rows against English
  posts (OLID, Davidson) and the Latin-script languages' rows), applied to texts on the English route; a
  text scored at least 0.5 (threshold chosen so that at most :data:`ROUTE_EN_MAX` of the English dev posts
  leave) gets the e5 head of that language, max'ed with its English scores.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rtaudit.engine.text.romanized import ROMANIZED, latin_share
from rtaudit.modelbuild.text import multilingual_data as MD

__all__ = ["ROMANIZED", "RU_SCHEMES", "LATIN_MIN", "ARABIZI_LABELS", "SOURCES", "RomanSource", "benign", "load", "missing",
           "ordinary_sources", "ru_latin"]

#: iuliia schemas used for Russian in Latin letters (chosen per row by hash).
RU_SCHEMES = ("TELEGRAM", "MOSMETRO", "WIKIPEDIA", "YANDEX_MAPS")
#: a row of ``trac1_hi`` or ``arabizi_off`` counts as romanized when at least this share of its letters is Latin.
LATIN_MIN = 0.8
#: ``arabizi_off``'s "Generic Class" → label.
ARABIZI_LABELS = {"offensive": 1, "non-offensive": 0}

_REPO = "victor7246/Hinglish_Hate_Detection"
_COMMIT = "2ada87ccff36841c73e75a3ed7651be498839422"


@dataclass(frozen=True)
class RomanSource:
    name: str
    language: str
    title: str
    repo: str
    commit: str
    licence: str
    files: tuple[tuple[str, str], ...]
    labels: str
    #: everyday text with no abuse annotation (every row 0), read by :func:`benign` only: never a training or
    #: threshold row of the abuse models, so the benign false-positive rate it gives is a held-out measure
    benign: bool = False


SOURCES = (
    RomanSource("hinglish_hs", "hi_latn", "Hindi-English code-mixed tweets, hate speech (Bohra et al. 2018)", _REPO, _COMMIT,
                "repository MIT; original data GPL-3.0 (deepanshu1995/HateSpeech-Hindi-English-Code-Mixed-Social-Media-Text)",
                (("hate_speech.tsv", "data/raw/Hate-speech-dataset/hate_speech.tsv"),), "yes = 1, no = 0"),
    RomanSource("trac1_hi", "hi_latn", "TRAC-1 Hindi aggression (Kumar et al. 2018), Facebook and Twitter (gold test sets), "
                "Latin-script rows", _REPO, _COMMIT, "CC BY-NC-SA 4.0 (stated in the set's README)",
                (("agr_hi_train.csv", "data/raw/trac1-dataset/hindi/agr_hi_train.csv"),
                 ("agr_hi_dev.csv", "data/raw/trac1-dataset/hindi/agr_hi_dev.csv"),
                 ("agr_hi_fb_gold.csv", "data/raw/trac1-dataset/trac-gold-set/agr_hi_fb_gold.csv"),
                 ("agr_hi_tw_gold.csv", "data/raw/trac1-dataset/trac-gold-set/agr_hi_tw_gold.csv")),
                "OAG = 1, NAG = 0, CAG dropped"),
    RomanSource("arabizi_off", "ar_latn", "Arabizi offensive language (Bensalem, Ait Mout and Rosso 2023), Algerian and Lebanese, "
                "Latin-script rows", "Imene1/Arabizi-offensive-language", "18f63c40d0e3992030fe1c348031306eee35bdbc",
                "none stated in the repository (ArabicNLP 2023 resource; cite)",
                (("Arabizi-Off_Lang_Dataset.csv", "Arabizi-Off_Lang_Dataset.csv"),), "offensive = 1, non-offensive = 0"),
    RomanSource("tunizi", "ar_latn", "TUNIZI Tunisian Arabizi sentiment (Fourati, Messaoudi and Haddad 2020), YouTube comments, "
                "positive ones", "chaymafourati/TUNIZI-Sentiment-Analysis-Tunisian-Arabizi-Dataset",
                "33a341ce27d7db58198e40469f7cdc229ab3db89", "none stated in the repository (AfricaNLP 2020 resource; cite)",
                (("TUNIZI-Dataset.txt", "TUNIZI-Dataset.txt"),), "positive (1) = benign 0, negative (-1) dropped", benign=True),
)


def _read(root: Path, src: RomanSource) -> Iterator[tuple[str, int]]:
    d = root / src.name
    if src.name == "hinglish_hs":
        for line in (d / "hate_speech.tsv").read_text(encoding="utf-8").splitlines():
            text, _, label = line.rpartition("\t")
            if label.strip() in ("yes", "no") and text.strip():
                yield text, int(label.strip() == "yes")
    elif src.name == "trac1_hi":
        for name, _ in src.files:
            for r in csv.reader(io.StringIO((d / name).read_text(encoding="utf-8"))):
                if len(r) >= 3 and r[-1] in ("OAG", "NAG") and latin_share(r[1]) >= LATIN_MIN:
                    yield r[1], int(r[-1] == "OAG")
    elif src.name == "arabizi_off":
        reader = csv.DictReader(io.StringIO((d / "Arabizi-Off_Lang_Dataset.csv").read_text(encoding="utf-8")))
        if reader.fieldnames is None or not {"Text", "Generic Class"} <= set(reader.fieldnames):
            raise ValueError(f"{d / 'Arabizi-Off_Lang_Dataset.csv'}: no 'Text' and 'Generic Class' columns")
        for row in reader:
            y = ARABIZI_LABELS.get((row["Generic Class"] or "").strip())
            text = row["Text"] or ""
            if y is not None and text.strip() and latin_share(text) >= LATIN_MIN:
                yield text, y
    elif src.name == "tunizi":
        # "<label>;<comment>" per line, label 1 (positive) or -1 (negative); a few lines open with a stray "%"
        for line in (d / "TUNIZI-Dataset.txt").read_text(encoding="utf-8").splitlines():
            label, sep, text = line.lstrip("%").partition(";")
            if sep and label.strip() == "1" and text.strip() and latin_share(text) >= LATIN_MIN:
                yield text, 0


def ru_latin(text: str) -> str:
    """``text`` (Cyrillic) in Latin letters by one of :data:`RU_SCHEMES`, picked by a hash of the text."""
    import iuliia

    scheme = RU_SCHEMES[int(hashlib.sha256(text.encode()).hexdigest(), 16) % len(RU_SCHEMES)]
    return getattr(iuliia, scheme).translate(text)


def missing(root: Path, lang: str | None = None) -> list[Path]:
    """Files of the romanized sources (of ``lang`` only, if given) that are not under ``root``."""
    return [root / s.name / local for s in SOURCES if lang is None or s.language == lang
            for local, _ in s.files if not (root / s.name / local).is_file()]


def load(root: Path, lang: str) -> list[MD.Row]:
    """Rows of a romanized language's abuse sets (normalized as the models read them; deduplicated per source; the
    benign sources are :func:`benign`'s).

    Raises:
        ValueError: ``lang`` is not one of :data:`ROMANIZED`, or a source file lacks its columns.
        FileNotFoundError: a source file is missing under ``root``.
    """
    out: list[MD.Row] = []
    if lang == "ru_latn":
        from rtaudit.engine.text.multilingual import model_text
        from rtaudit.engine.text.normalize import normalize

        for r in MD.load(root, "ru"):
            text = model_text(normalize(ru_latin(r.text)).text)
            if text:
                out.append(MD.Row(f"{r.source}_latn", lang, text, r.label, r.split))
        return out
    return _rows(root, lang, benign=False)


def benign(root: Path, lang: str) -> list[MD.Row]:
    """Rows of ``lang``'s benign sources (:attr:`RomanSource.benign`: everyday text, every label 0; none for ``hi_latn``
    and ``ru_latn``), with their splits, as :func:`load` gives them. Measurement only: no model is fitted on them and no
    threshold is chosen on them.

    Raises:
        ValueError: ``lang`` is not one of :data:`ROMANIZED`.
        FileNotFoundError: a source file is missing under ``root``.
    """
    return _rows(root, lang, benign=True)


def _rows(root: Path, lang: str, benign: bool) -> list[MD.Row]:
    from rtaudit.engine.text.multilingual import model_text
    from rtaudit.engine.text.normalize import normalize

    if lang not in ROMANIZED:
        raise ValueError(f"romanized language must be one of {ROMANIZED}, got {lang!r}")
    out: list[MD.Row] = []
    for src in (s for s in SOURCES if s.language == lang and s.benign == benign):
        seen: set[str] = set()
        for raw, label in _read(root, src):
            text = model_text(normalize(raw.strip()).text)
            if not text or text in seen:
                continue
            seen.add(text)
            out.append(MD.Row(src.name, lang, text, label, MD.split_of(src.name, text)))
    return out


def ordinary_sources(lang: str) -> set[str]:
    """Sources of ``lang`` whose rows are ordinary sentences (no abuse annotation)."""
    if lang == "ru_latn":
        return {f"{s.name}_latn" for s in MD.sources("ru") if s.benign_only}
    return set()
