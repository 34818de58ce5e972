"""Text moderation beyond English and Chinese: language detection, routing, per-language models.

Routing (:meth:`LanguageRouter.refine`) runs after the script route of
:func:`rtaudit.engine.text.scoring.route_normalized`: a text that the script rule sends to the
English model (Latin letters) or to ``"other"`` (Cyrillic, Arabic, Devanagari, ...) is read, as
the user wrote it (diacritics, which normalization takes off, are lingua's best cue between
Portuguese and Spanish), by lingua (``lingua-language-detector``: n-gram models inside the wheel, no download, run
offline), restricted to :data:`DETECTED` (the languages served here plus a few *decoys* that
share their scripts, so Dutch or Ukrainian text is not forced into German or Russian: a decoy
keeps the script route). A text detected as one of :data:`LANGUAGES` goes to that language's
:class:`~rtaudit.engine.text.heads.CharNgramModel` (character n-grams, TF-IDF, logistic regression:
the Chinese model's recipe, trained by ``rtaudit text train-multilingual`` on the public sets of
:mod:`rtaudit.modelbuild.text.multilingual_data`), scored as ``offensive`` (for :data:`LEXICAL_MAX`, the
larger of the model and the lexical score). Latin-script text leaves the English model only when the detected language is
ahead of English by :data:`LATIN_MARGIN` (short English posts are often a near tie between
English and French or Italian; the English model is the stronger one on English) and holds at
least :data:`LATIN_MIN_WORDS` words.

Artifacts live apart from the English ones: ``artifacts/multilingual/<lang>_char_lr.npz`` and
``artifacts/multilingual/manifest.json`` (sha256 of each file, datasets with repository, commit
and licence, split seed, per-language dev report), checked on load like the others.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from rtaudit.engine.text.heads import ARTIFACTS, ArtifactError, CharNgramModel, load_manifest, verified_path
from rtaudit.engine.text.normalize import NormalizedText

log = logging.getLogger(__name__)

#: languages with a model here (ISO 639-1), in the order of the tables.
LANGUAGES = ("es", "fr", "de", "pt", "it", "ru", "ar", "hi")
#: languages whose ``offensive`` is the larger of their model's and the lexical (English) score: the non-Latin
#: scripts, where English profanity stands out among the other script's words. In Latin-script text the
#: English lexical model reads foreign words as English profanity (German "die", Italian "ho", French
#: "con"): it flagged 16 % of the German benign sentences and 8 % of the Italian ones (2026-12-01).
LEXICAL_MAX = ("ru", "ar", "hi")
#: lingua's name of each served language, of English, and of the decoys (kept on the script route).
_LINGUA = {"en": "ENGLISH", "es": "SPANISH", "fr": "FRENCH", "de": "GERMAN", "pt": "PORTUGUESE",
           "it": "ITALIAN", "ru": "RUSSIAN", "ar": "ARABIC", "hi": "HINDI"}
DECOYS = ("DUTCH", "POLISH", "TURKISH", "INDONESIAN", "SWEDISH", "ROMANIAN", "CATALAN", "UKRAINIAN",
          "BULGARIAN", "PERSIAN", "URDU")
#: (not Marathi: lingua took 3 of the 50 Hindi benign sentences for Marathi, and Hindi is the one served)
DETECTED = tuple(_LINGUA.values()) + DECOYS
#: a Latin-script text goes to a non-English model only when that language's lingua confidence is at
#: least this much above English's (chosen on the dev splits and English dev posts: docs/text-moderation.md).
LATIN_MARGIN = 0.15
#: ...and only when it has at least this many words: one word is too few to tell a
#: language by (a newcomer's "hello" went to the Italian model, its verdict with no English category)
LATIN_MIN_WORDS = 2
#: subdirectory of the artifacts directory with the per-language models and their manifest.
SUBDIR = "multilingual"


#: what the per-language models do not read: @mentions, URLs, the sets' placeholders (GermEval's
#: ``|LBR|``, MEX-A3T's ``@USUARIO``, EmoEvent's ``HASHTAG``/``URL``, ``USER``), ``RT`` and the ``#`` of
#: hashtags. In the training sets the benign class carries far more of them than the abusive one (news
#: accounts tag and link), so a model that reads them learns "no @mention, no link" as a sign of abuse
#: and flags ordinary sentences (GermEval: 16 % of the benign list before this, measured 2026-12-01).
SOCIAL = re.compile(r"@\w+|https?://\S+|www\.\S+|\|lbr\||\b(?:hashtag|url|user|usuario|rt)\b|#", re.IGNORECASE)


def social_view(n: NormalizedText) -> NormalizedText:
    """``n`` without :data:`SOCIAL` (runs of spaces left by a removal collapsed), offsets kept."""
    drop: set[int] = set()
    for m in SOCIAL.finditer(n.text):
        drop.update(range(m.start(), m.end()))
    if not drop:
        return n
    keep: list[int] = []
    for i, ch in enumerate(n.text):
        if i in drop or (ch.isspace() and (not keep or n.text[keep[-1]].isspace())):
            continue
        keep.append(i)
    while keep and n.text[keep[-1]].isspace():
        keep.pop()
    return NormalizedText(n.original, "".join(n.text[i] for i in keep), tuple(n.offsets[i] for i in keep), n.steps)


def model_text(text: str) -> str:
    """What a per-language model reads of an already normalized text (:func:`social_view`'s text)."""
    t = SOCIAL.sub(" ", text)
    return re.sub(r"\s+", " ", t).strip()


def model_file(lang: str) -> str:
    return f"{lang}_char_lr.npz"


def artifacts_dir(base: Path | None = None) -> Path:
    """``<base or the shipped artifacts>/multilingual``."""
    return (base or ARTIFACTS) / SUBDIR


class LanguageRouter:
    """lingua restricted to :data:`DETECTED`; :meth:`detect` gives ``(language code or lingua name,
    confidence, English's confidence)`` per text (``None`` for a text lingua gives up on)."""

    def __init__(self) -> None:
        from lingua import Language, LanguageDetectorBuilder

        langs = [getattr(Language, name) for name in DETECTED]
        self._code = {getattr(Language, name): code for code, name in _LINGUA.items()}
        self._english = Language.ENGLISH
        self._detector = LanguageDetectorBuilder.from_languages(*langs).build()

    def detect(self, texts: list[str]) -> list[tuple[str, float, float] | None]:
        if not texts:
            return []
        out: list[tuple[str, float, float] | None] = []
        for values in self._detector.compute_language_confidence_values_in_parallel(texts):
            if not values or values[0].value <= 0.0:
                out.append(None)
                continue
            top = values[0]
            english = next((v.value for v in values if v.language == self._english), 0.0)
            out.append((self._code.get(top.language, top.language.name), float(top.value), float(english)))
        return out

    def languages(self, texts: list[str], script_routes: list[str], unsure: list[str | None] | None = None) -> list[str]:
        """The route of each normalized text given its script route (``"en"``, ``"zh"``, ``"other"``):
        one of :data:`LANGUAGES` when detected (see the module docstring), else the script route.

        ``unsure``: when given (a list as long as ``texts``), filled for each text left on the ``"en"``
        route whose most likely language is not English: that language's code (a served one kept on English
        by the margin) or lingua name (a decoy), else ``None``."""
        ask = [i for i, r in enumerate(script_routes) if r in ("en", "other")]
        out = list(script_routes)
        for i, found in zip(ask, self.detect([texts[i] for i in ask])):
            if found is not None and unsure is not None and script_routes[i] == "en" and found[0] != "en":
                unsure[i] = found[0]
            if found is None or found[0] not in LANGUAGES:
                continue
            lang, conf, english = found
            if script_routes[i] == "en" and (conf - english < LATIN_MARGIN or len(texts[i].split()) < LATIN_MIN_WORDS):
                continue
            out[i] = lang
        return out


@dataclass
class LanguageModels:
    """The per-language models of one artifacts directory and the router that picks them."""

    models: dict[str, CharNgramModel]
    version: str
    router: LanguageRouter | None

    @classmethod
    def load(cls, base: Path | None = None) -> "LanguageModels":
        """Models of ``<base>/multilingual`` (default: the shipped ones), each sha256-checked.

        A model bundle made before the per-language models (no ``multilingual/manifest.json``) loads
        with no models: routing by script only, as before. The shipped directory must be complete.

        Raises:
            ArtifactError: the shipped manifest is missing, or a listed model is missing or fails its sha256.
        """
        root = artifacts_dir(base)
        if base is not None and not (root / "manifest.json").exists():
            log.warning("%s has no per-language models: text in other languages gets the lexical score only", root)
            return cls({}, "none", None)
        manifest = load_manifest(root)
        models = {lang: CharNgramModel.load(verified_path(model_file(lang), root))
                  for lang in LANGUAGES if model_file(lang) in manifest.get("artifacts", {})}
        if not models:
            raise ArtifactError(f"{root / 'manifest.json'} lists no per-language model")
        return cls(models, str(manifest.get("version", "unknown")), LanguageRouter())

    def routes(self, texts: list[str], script_routes: list[str], unsure: list[str | None] | None = None) -> list[str]:
        """Routes of the texts (:meth:`LanguageRouter.languages`; ``unsure`` filled as there)."""
        if self.router is None:
            return list(script_routes)
        found = self.router.languages(texts, script_routes, unsure)
        return [r if r in self.models else s for r, s in zip(found, script_routes)]
