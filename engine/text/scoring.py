"""One function from raw texts to category scores and evidence spans: :meth:`TextScorer.score`.

Pipeline per batch (all steps batched):

1. :func:`engine.text.normalize.normalize` (NFKC, format characters, confusables,
   leetspeak, split letters) with an offset map back to the original text.
2. Route by script (of the normalized text's letters): at least :data:`HAN_SHARE` Han
   → the Chinese model (:class:`~engine.text.heads.ChineseModel`, trained on COLD,
   ``language="zh"``); else at least :data:`LATIN_SHARE` Latin (or no letters) → the
   English model (``"en"``); else (Cyrillic, Greek, Arabic, ... text) ``"other"``:
   no semantic model covers it (MiniLM-L6's vocabulary is English), so only the
   lexical model's ``offensive`` score is given.
3. English: alt-profanity-check probability (lexical) and MiniLM-L6 embedding
   (semantic, ONNX) → stacked logistic head → calibrated ``offensive``, ``hate``,
   ``targeted_insult`` scores (0.5 = the dev-optimal threshold).
4. Evidence for texts with a category at or above ``evidence_min``: each word's
   score is the larger of (a) alt-profanity-check's probability for the word alone
   and (b) occlusion — how much the text's top category score drops when the word
   is deleted (the semantic head re-run on the text without it; Zeiler & Fergus
   2014). Chinese: occlusion of runs of characters with positive n-gram weight.
   Spans are ``[start, end)`` offsets into the ORIGINAL text.
"""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np

from engine.text.data import CATEGORIES
from engine.text.heads import ChineseModel, EnglishHead, load_manifest
from engine.text.normalize import NormalizedText, normalize

#: a text is routed to the Chinese model when Han characters are at least this share of its letters.
HAN_SHARE = 0.3
#: ...else to the English model when Latin letters are at least this share (or it has no letters).
LATIN_SHARE = 0.5
#: words (letters/digits, inner apostrophes) on the normalized text.
WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)
#: occlusion is run on at most this many words of a text (longer texts: lexical evidence after that).
MAX_OCCLUDED_WORDS = 64


def script_shares(text: str) -> tuple[float, float]:
    """``(Han, Latin)`` shares of the letters of ``text``; ``(0.0, 1.0)`` when it has no letters."""
    letters = han = latin = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            name = unicodedata.name(ch, "")
            han += "CJK UNIFIED" in name
            latin += name.startswith("LATIN")
    return (han / letters, latin / letters) if letters else (0.0, 1.0)


def han_share(text: str) -> float:
    """Share of Han characters among the letters of ``text`` (0.0 when it has no letters)."""
    return script_shares(text)[0]


def route(text: str) -> str:
    """``"zh"``, ``"en"`` or ``"other"`` for a normalized text (see the module docstring)."""
    han, latin = script_shares(text)
    return "zh" if han >= HAN_SHARE else "en" if latin >= LATIN_SHARE else "other"


@dataclass(frozen=True)
class Span:
    """Evidence: ``original[start:end] == text``; ``score`` in ``[0, 1]``; ``source`` says which model."""

    start: int
    end: int
    text: str
    category: str
    score: float
    source: str  # "lexical" | "occlusion"


@dataclass(frozen=True)
class TextScore:
    """One text's result: ``scores`` category → calibrated probability; ``spans`` best first."""

    scores: dict[str, float]
    spans: list[Span] = field(default_factory=list)
    language: str = "en"  # "en" | "zh" | "other"
    normalized: str = ""


class TextScorer:
    """Loads the lexical model, the MiniLM encoder (ONNX), the English head and the Chinese model once.

    Args:
        prefer_gpu: CUDA execution provider for the encoder when onnxruntime-gpu and a GPU exist.
        evidence_min: compute spans only for texts with some category at least this score.
        span_min: keep a word as evidence when its span score is at least this.
    Raises:
        engine.text.heads.ArtifactError: a trained artifact is missing or fails its sha256 check.
    """

    def __init__(self, *, prefer_gpu: bool = True, evidence_min: float = 0.5, span_min: float = 0.25) -> None:
        from engine.models.profanity import ProfanityScorer
        from engine.text.encoder import MiniLMEncoder

        self.lexical = ProfanityScorer()
        self.encoder = MiniLMEncoder(prefer_gpu=prefer_gpu)
        self.head = EnglishHead.load()
        self.zh = ChineseModel.load()
        self.evidence_min = evidence_min
        self.span_min = span_min
        self.categories = tuple(self.head.categories)
        manifest = load_manifest()
        self.version = (f"{manifest['version']}+minilm-{self.encoder.version}"
                        f"+apc-{metadata.version('alt-profanity-check')}")

    # -- English -------------------------------------------------------------------------------------
    def _english(self, texts: list[str]) -> np.ndarray:
        """Calibrated ``float64[n, C]`` for normalized English texts."""
        if not texts:
            return np.zeros((0, len(self.categories)))
        feats = EnglishHead.features(self.encoder.encode(texts), self.lexical.score_texts(texts))
        return self.head.predict(feats)

    def _english_spans(self, items: list[tuple[NormalizedText, np.ndarray]]) -> list[list[Span]]:
        words = [[(m.start(), m.end()) for m in WORD.finditer(n.text)] for n, _ in items]
        flat_words = [n.text[s:e] for (n, _), ws in zip(items, words) for s, e in ws]
        lex_word = self.lexical.score_texts(flat_words) if flat_words else np.zeros(0)
        variants, owners = [], []
        for k, ((n, _), ws) in enumerate(zip(items, words)):
            for j, (s, e) in enumerate(ws[:MAX_OCCLUDED_WORDS]):
                variants.append(n.text[:s] + n.text[e:])
                owners.append((k, j))
        occluded = self._english(variants)
        drops: list[np.ndarray] = [np.zeros((len(ws), len(self.categories))) for ws in words]
        for (k, j), row in zip(owners, occluded):
            drops[k][j] = np.clip(items[k][1] - row, 0.0, 1.0)
        out, i = [], 0
        for (n, full), ws, drop in zip(items, words, drops):
            flagged = [c for c in range(len(self.categories)) if full[c] >= self.evidence_min] or [int(np.argmax(full))]
            spans = []
            for j, (s, e) in enumerate(ws):
                lex = float(lex_word[i])
                i += 1
                c = max(flagged, key=lambda c: drop[j, c])
                occ = float(drop[j, c])
                score, source = (lex, "lexical") if lex >= occ else (occ, "occlusion")
                if lex >= 0.5 and occ < lex:
                    c = flagged[0]
                if score >= self.span_min:
                    spans.append(self._span(n, s, e, self.categories[c], score, source))
            out.append(sorted(spans, key=lambda sp: -sp.score))
        return out

    # -- Chinese -------------------------------------------------------------------------------------
    def _chinese_spans(self, n: NormalizedText, full: float) -> list[Span]:
        contrib = self.zh.char_contributions(n.text)
        if not len(contrib) or contrib.max() <= 0:
            return []
        runs, start = [], None
        hot = contrib >= 0.25 * contrib.max()
        for i, h in enumerate(list(hot) + [False]):
            if h and start is None:
                start = i
            elif not h and start is not None:
                runs.append((start, i))
                start = None
        without = self.zh.predict([n.text[:s] + n.text[e:] for s, e in runs])
        spans = [self._span(n, s, e, "offensive", float(max(0.0, full - p)), "occlusion") for (s, e), p in zip(runs, without)]
        return sorted((sp for sp in spans if sp.score >= self.span_min / 2), key=lambda sp: -sp.score)

    @staticmethod
    def _span(n: NormalizedText, s: int, e: int, category: str, score: float, source: str) -> Span:
        os_, oe = n.to_original(s, e)
        return Span(os_, oe, n.original[os_:oe], category, round(min(max(score, 0.0), 1.0), 4), source)

    # -- public --------------------------------------------------------------------------------------
    def score(self, texts: list[str], *, evidence: bool = True) -> list[TextScore]:
        """Score a batch of raw texts.

        Args:
            texts: raw user texts (any script; empty strings allowed).
            evidence: compute evidence spans (occlusion costs one extra encoder pass per word
                of each flagged text, batched).
        Returns:
            ``len(texts)`` :class:`TextScore`, in order. English texts get every category of
            the head; Chinese texts get ``offensive`` (COLD's label); other scripts get the
            lexical model's ``offensive`` only.
        Raises:
            TypeError: an item is not a ``str``.
        """
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"TextScorer.score expects str items, got {type(t).__name__}")
        norm = [normalize(t) for t in texts]
        routes = [route(n.text) for n in norm]
        en_idx = [i for i, r in enumerate(routes) if r == "en"]
        zh_idx = [i for i, r in enumerate(routes) if r == "zh"]
        other_idx = [i for i, r in enumerate(routes) if r == "other"]
        en_scores = self._english([norm[i].text for i in en_idx])
        zh_scores = self.zh.predict([norm[i].text for i in zh_idx])
        other_scores = self.lexical.score_texts([norm[i].text for i in other_idx])
        results: list[TextScore | None] = [None] * len(texts)
        for i, p in zip(other_idx, other_scores):
            results[i] = TextScore({"offensive": round(float(p), 4)}, [], "other", norm[i].text)
        for i, row in zip(en_idx, en_scores):
            results[i] = TextScore({c: round(float(v), 4) for c, v in zip(self.categories, row)}, [], "en", norm[i].text)
        for i, p in zip(zh_idx, zh_scores):
            results[i] = TextScore({"offensive": round(float(p), 4)}, [], "zh", norm[i].text)
        if evidence:
            flagged_en = [(i, row) for i, row in zip(en_idx, en_scores) if row.max() >= self.evidence_min]
            for (i, _), spans in zip(flagged_en, self._english_spans([(norm[i], row) for i, row in flagged_en])):
                results[i].spans.extend(spans)  # type: ignore[union-attr]
            for i, p in zip(zh_idx, zh_scores):
                if p >= self.evidence_min:
                    results[i].spans.extend(self._chinese_spans(norm[i], float(p)))  # type: ignore[union-attr]
        return results  # type: ignore[return-value]


def throughput(scorer: TextScorer, texts: list[str], batch_size: int) -> float:
    """Texts per second scoring ``texts`` (with evidence) in batches of ``batch_size``."""
    started = time.perf_counter()
    for lo in range(0, len(texts), batch_size):
        scorer.score(texts[lo:lo + batch_size])
    return len(texts) / (time.perf_counter() - started)
