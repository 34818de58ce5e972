"""What the English head is fitted on, and how much each row counts: the datasets and their splits, the
safety categories' negatives and per-dataset weights (the provenance of every dataset added since the first
head is :data:`rtaudit.modelbuild.text.provenance.DATA_PROVENANCE`). Pure: reads the data directories, fits nothing (fitting and
thresholds are :mod:`rtaudit.modelbuild.text.train`; :mod:`rtaudit.modelbuild.text.finetune` uses the same
rows and weights).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from rtaudit.modelbuild.text import data as D
from rtaudit.engine.text.heads import sha256_file
from rtaudit.modelbuild.text.context_contrasts import context_examples
from rtaudit.modelbuild.text.identity_terms import identity_key
from rtaudit.modelbuild.text.safety_negatives import contrast_examples, emoji_negatives, prose_passages

EN_DATASETS = ("davidson", "olid", "hatexplain", "hatemoji_build")
#: datasets whose dev rows do not choose C or thresholds (HatemojiBuild's validation split chose
#: :data:`DATASET_WEIGHT` and the labelling instead; used for both, it pulled ``hate``'s threshold
#: from 0.66 to 0.52 and cost Davidson 0.03 dev macro-F1).
NOT_FOR_THRESHOLDS = frozenset({"hatemoji_build"})
#: ``violence`` negatives that use a violent word (:data:`VIOLENT_WORDS`: "shoot me an email", "killed it
#: on stage", "dead to the world", angry posts that threaten no one) count this many times: without
#: it the head learnt the words ("I will kill it at the gym tomorrow" 0.86) rather than the threat.
HARD_NEGATIVE_WEIGHT = 4.0
VIOLENT_WORDS = re.compile(r"\b(?:kill\w*|shoot\w*|shot|die[sd]?|dying|dead|murder\w*|stab\w*|hang\w*|hung|"
                           r"execut\w*|bomb\w*|burn\w*|beat\w*|hurt\w*|destroy\w*|attack\w*|blow\w* up)\b", re.IGNORECASE)
#: ``self-harm`` negatives that say goodbye ("see you tomorrow", "bye!", "gotta go", "take care") count
#: :data:`HARD_NEGATIVE_WEIGHT` times too, and every Chit-Chat train farewell is fitted (:func:`english_examples`):
#: r/SuicideWatch posts say goodbye, and the 68 farewells of the hashed Chit-Chat sample did not outweigh them
#: ("thanks so much, see you tomorrow!" 0.74 → 0.28). Weight chosen on Chit-Chat dev (docs/text-moderation.md).
FAREWELL_WORDS = re.compile(r"\b(?:bye+|goodbye|good ?night|see (?:you|ya|u)|talk (?:to you |to ya )?(?:later|soon|tomorrow)|"
                            r"gotta go|got to go|have to go|take care|farewell|catch you later|ttyl)\b", re.IGNORECASE)
#: category → the pattern of its hard negatives (negatives that count :data:`HARD_NEGATIVE_WEIGHT` times).
HARD_NEGATIVES = {"violence": VIOLENT_WORDS, "self-harm": FAREWELL_WORDS}
#: factor on the written ``violence`` contrasts (:mod:`rtaudit.modelbuild.text.contrasts`, negatives only). At 1 the
#: refit of 2026-12-06 left "I'm going to murder this burrito" at violence 0.52 (docs/text-moderation.md, "Idioms and
#: help texts").
SAFETY_CONTRAST_WEIGHT = 2.0
#: factor on both classes of the written context contrasts and their direct forms
#: (:mod:`rtaudit.modelbuild.text.context_contrasts`) in every category they label. Each (dataset, class) cell weighs
#: as much as all of Davidson's rows of that class at 1; as negatives alone at 1 a fine-tuned encoder read every
#: direct insult as harmless (the functional suite's insult_direct 0.86 → 0.03).
CONTEXT_CONTRAST_WEIGHT = 0.5
#: category → dataset → (factor on its positive rows, factor on its negative rows), applied to
#: :func:`balanced_weights` (1 where absent). HatemojiBuild's hateful rows name an identity in
#: most cases and its non-hateful rows are their contrasts (the same post with a harmless emoji,
#: counter-speech, identities in neutral statements): at equal weight the linear head learnt
#: "names an identity" as offensive ("We should celebrate Jews." 0.61), so the hateful rows count
#: half. Chosen on HatemojiBuild validation macro-F1 (flagged = any category ≥ 0.5) among the
#: settings that keep the guard rails (no English dev set more than 0.01 macro-F1 below the model
#: before HatemojiBuild, benign list ≤ 1 % flagged, the functional suite's floors, "you 🐷" still
#: flagged). Measured on validation: (0.5, 0.5) 0.577 but the functional suite's identity_positive
#: fell from 0.88 to 0.67; (1, 1) 2 of 168 benign texts flagged; every non-hateful row labelled
#: not offensive at (0.5, 1) 0.555, but "you 🐷" fell to 0.43 (see :func:`unlabel_profane_contrasts`);
#: the setting shipped, 0.551 (``offensive``). ``hate``, since 2026-12-03 a decision of its own (no longer capped by
#: ``offensive``), counts HatemojiBuild at 1: fine-tuned with it at 0.1, 1 and 3 (runs I, J, K of docs/text-moderation.md,
#: "Hate as its own decision"), validation ``hate`` macro-F1 0.45 / 0.50 / 0.54 at the heads' thresholds and dev
#: macro-F1 Davidson / OLID / HateXplain 0.700 / 0.670 / 0.757, 0.706 / 0.667 / 0.750, 0.699 / 0.667 / 0.749: 3 bought
#: no more on the test split (0.500 against 0.505) and cost Davidson.
#:
#: Chit-Chat's messages (negatives only, :data:`CHITCHAT_TRAIN_ROWS`) count half for the abuse categories and
#: fully for the safety ones. Measured 2026-12-02 on the frozen encoder (fp32 heads on training features; share of
#: Chit-Chat test messages flagged, all / laughing; the functional suite's emoji_insult): without them 5.7 % /
#: 13.8 %, emoji_insult 0.58; at 1 2.4 % / 4.4 % but emoji_insult 0.08 ("you 🐷" reads as chat); at 0.5 3.1 % /
#: 6.4 %, 0.42, dev macro-F1 within 0.006 of without; at 0.25 3.8 % / 7.7 %, 0.50, but "shoot me an email"
#: crossed into ``violence`` with the safety weight at 0.25. A fine-tuned encoder (layers 4-5) with them at 1
#: read no laughter as abuse but lost profane insults ("you fucking idiot" 0.20): not kept.
_CONTEXT = {"context_contrasts": (CONTEXT_CONTRAST_WEIGHT, CONTEXT_CONTRAST_WEIGHT),
            "identity_statements": (1.0, 1.0)}
DATASET_WEIGHT: dict[str, dict[str, tuple[float, float]]] = {
    "offensive": {"hatemoji_build": (0.5, 1.0), "chitchat": (1.0, 0.5), **_CONTEXT},
    "hate": {"hatemoji_build": (1.0, 1.0), "chitchat": (1.0, 0.5), **_CONTEXT},
    "targeted_insult": {"chitchat": (1.0, 0.5), **_CONTEXT},
    "violence": {"contrasts": (1.0, SAFETY_CONTRAST_WEIGHT), **_CONTEXT}}
#: Davidson train rows fitted: every hate row plus a hashed sample of the rest up to this many
#: (CPU budget for embedding; Davidson is 77 % offensive and the other sets cover that class).
DAVIDSON_TRAIN_CAP = 8000
#: safety sets that are negatives of ``violence`` only: as ``self-harm`` negatives, short ordinary
#: prose and tweets taught the head that a short text is not about self-harm (its positives are all
#: Reddit posts): "I want to die" fell from 0.78 to 0.34. ``self-harm``'s negatives are the r/teenagers
#: posts, the threat sets and the hashed sample of Davidson, OLID and HateXplain rows.
VIOLENCE_ONLY_NEGATIVES = frozenset({"epie"})
#: Davidson, OLID and HateXplain rows labelled negative for the safety categories: every row their
#: annotators found neither offensive nor hateful (OLID files threats under OFF, so a NOT row threatens
#: no one; ordinary tweets, with "kill", "shoot", "die" in their everyday senses), and of the offensive
#: rows a hashed sample of this many per split and dataset (abuse that is not a threat: profanity
#: alone must not read as one; a few may be threats, unannotated).
SAFETY_NEGATIVES = {"train": 1500, "dev": 400}
SAFETY_NEGATIVE_SETS = ("davidson", "olid", "hatexplain")
#: Chit-Chat messages fitted (a hashed sample of its train split; its dev split is not read, its test split
#: is the conversational false-positive row of ``rtaudit eval``), negatives of every category. Without
#: them the tweet sets taught that laughter is abuse (their laughter is mostly at someone): "lol" 0.65,
#: "haha so funny" 0.48 on the frozen encoder, 0.9+ on every fine-tuned one (docs/text-moderation.md).
#: Every train message that says goodbye (:data:`FAREWELL_WORDS`, about 1,100 more) is fitted besides the sample.
CHITCHAT_TRAIN_ROWS = 8000


#: category → the datasets whose sample weights for it are identity-balanced (:func:`identity_balanced`). DynaHate is
#: in :data:`~rtaudit.modelbuild.text.data.EVALUATION_ONLY_SETS`, so this changes nothing in the shipped fit; it is the
#: setting of the runs that fit DynaHate (docs/text-moderation.md, "Identity-balanced weights"): balanced on DynaHate
#: only (E3) or on every set (E1), ``hate`` only or with ``offensive`` and ``targeted_insult`` (E2), positive
#: statements about groups rose from 0.50 (D3, unbalanced) to 0.62-0.71, not back to 0.88.
IDENTITY_BALANCED: dict[str, frozenset[str]] = {"hate": frozenset({"dynahate"})}
#: pseudo-count of :func:`identity_balanced`'s estimate of P(class | dataset, group), shrunk toward P(class | dataset)
IDENTITY_PRIOR_ROWS = 20
#: :func:`identity_balanced`'s factors are clipped to [1 / this, this]
IDENTITY_MAX_FACTOR = 4.0


def identity_balanced(y: np.ndarray, datasets: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Instance-weighting factors ``float64[n]`` that make a dataset's labels independent of the group a text names:
    a row of dataset ``d`` (``datasets``: ``str[n]``), group ``z`` (``keys``: ``str[n]``,
    :func:`rtaudit.modelbuild.text.identity_terms.identity_key`, ``""`` for none) and class ``c`` (``y``: ``int[n]``) gets ``P(c | d) / P(c | d, z)``, the debiasing weight of Zhang,
    Wang, Hu, Xiao, Wang, Zhang and Liu (2020), "Demographics Should Not Be the Reason of Toxicity: Mitigating
    Discrimination in Text Classifications with Instance Weighting" (ACL). ``P(c | d, z)`` is shrunk toward ``P(c | d)``
    by :data:`IDENTITY_PRIOR_ROWS` pseudo-rows and the factor clipped to :data:`IDENTITY_MAX_FACTOR`; each (dataset,
    class) cell is then rescaled to its total before, so that it multiplies :func:`balanced_weights` without moving
    weight between cells.

    Why: in DynaHate 65-73 % of the rows that name Black people, women, Muslims or Jews are hateful against 41 % of
    those that name no group, so a head fitted on it read "We should celebrate Black people." as hate (docs/
    text-moderation.md, "DynaHate")."""
    factors = np.ones(len(y))
    for d in np.unique(datasets):
        in_d = datasets == d
        for c in np.unique(y[in_d]):
            prior = np.mean(y[in_d] == c)
            for z in np.unique(keys[in_d]):
                m = in_d & (keys == z)
                p = (np.sum(y[m] == c) + IDENTITY_PRIOR_ROWS * prior) / (m.sum() + IDENTITY_PRIOR_ROWS)
                factors[m & (y == c)] = np.clip(prior / p, 1 / IDENTITY_MAX_FACTOR, IDENTITY_MAX_FACTOR)
            cell = in_d & (y == c)
            factors[cell] *= cell.sum() / factors[cell].sum()
    return factors


#: category → the datasets whose contrast twins (``Example.twin``) :func:`contrast_pairs` pairs for it.
CONTRAST_PAIRED: dict[str, frozenset[str]] = {"hate": frozenset({"hatemoji_build", "dynahate"})}
#: twins less alike than this (``difflib.SequenceMatcher.ratio``, 0-1) are not paired: a neighbouring DynaHate row
#: that is a new statement rather than a perturbation ("black birds can actually dive bomb humans ..." next to
#: "Muzzie terrorists can actually bomb countries ...", 0.63, is kept; unrelated neighbours score 0.2-0.4).
CONTRAST_MIN_RATIO = 0.6


def contrast_pairs(examples: list[D.Example], cat: str, train: np.ndarray) -> np.ndarray:
    """Row indices ``int64[P, 2]`` (positive, negative) of the contrast twins among ``examples[train]`` for category
    ``cat`` (``train``: ``bool[n]``): both rows in a dataset of :data:`CONTRAST_PAIRED` for ``cat``, both train rows,
    labelled 1 and 0 for ``cat``, and alike to :data:`CONTRAST_MIN_RATIO` (``difflib``'s ratio on the raw text).
    Each pair is listed once. ``int64[0, 2]`` when there are none.

    Why: a hateful statement and its minimally edited non-hateful twin ("I adore the idea of burning all the trans
    people" / "I abhor ...") differ only where the decision should; fitted apart, the head learns the group word and
    the sentence frame they share (docs/text-moderation.md, "Contrast pairs")."""
    import difflib

    datasets = CONTRAST_PAIRED.get(cat, frozenset())
    index = {(e.dataset, e.uid): i for i, e in enumerate(examples) if train[i] and e.dataset in datasets and cat in e.labels}
    pairs: set[tuple[int, int]] = set()
    for (dataset, _), i in index.items():
        j = index.get((dataset, examples[i].twin))
        if j is None or examples[i].labels[cat] == examples[j].labels[cat]:
            continue
        pos, neg = (i, j) if examples[i].labels[cat] else (j, i)
        if difflib.SequenceMatcher(None, examples[pos].text, examples[neg].text).ratio() >= CONTRAST_MIN_RATIO:
            pairs.add((pos, neg))
    return np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)


def balanced_weights(y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Sample weights ``float64[n]`` giving every (dataset, class) cell the same total weight (``n`` in all).

    Davidson is ~77 % offensive, HateXplain ~60 %, OLID ~33 %: unweighted, the head learns
    the pooled prior and the largest set's, so neutral text unlike any training row
    ("My zip code is 90210.") lands above threshold. Equal cells make the fitted intercept
    prior-free per dataset (scikit-learn's ``class_weight="balanced"`` applied per dataset).
    """
    w = np.zeros(len(y))
    cells = [(g, c) for g in np.unique(groups) for c in np.unique(y) if np.any((groups == g) & (y == c))]
    for g, c in cells:
        m = (groups == g) & (y == c)
        w[m] = len(y) / (len(cells) * m.sum())
    return w


def english_examples(root: Path, safety_root: Path | None = None) -> list[D.Example]:
    """Train + dev rows of :data:`EN_DATASETS` (never a test split), with Davidson's train capped at
    :data:`DAVIDSON_TRAIN_CAP`; with ``safety_root``, also the train + dev rows of the safety sets and
    the safety categories' negatives (:data:`SAFETY_NEGATIVES`) labelled on the rows already there."""
    from rtaudit.modelbuild.text.evaluation import sample

    out: list[D.Example] = []
    for d in EN_DATASETS:
        rows = [r for r in D.load(d, root) if r.split in ("train", "dev")]
        if d == "davidson":
            train = [r for r in rows if r.split == "train"]
            hate = [r for r in train if r.labels["hate"]]
            rest = sample([r for r in train if not r.labels["hate"]], DAVIDSON_TRAIN_CAP - len(hate))
            rows = hate + rest + [r for r in rows if r.split == "dev"]
        out.extend(rows)
    out.extend(short_fragments(out))
    out.extend(context_examples())
    if safety_root is None:
        return out
    negative = {(d, r.uid) for d in SAFETY_NEGATIVE_SETS for split, n in SAFETY_NEGATIVES.items()
                for r in sample([e for e in out if e.dataset == d and e.split == split and e.labels.get("offensive")], n)}
    ordinary = {(e.dataset, e.uid) for e in out if e.dataset in SAFETY_NEGATIVE_SETS and not e.labels.get("offensive")}
    none = {c: 0 for c in D.SAFETY_CATEGORIES}
    out = [replace(e, labels={**e.labels, **none}) if (e.dataset, e.uid) in negative else
           replace(e, labels={**e.labels, "violence": 0}) if (e.dataset, e.uid) in ordinary else e for e in out]
    for d in D.SAFETY_DATASETS:
        if d in D.EVALUATION_ONLY_SETS:
            continue
        rows = [r for r in D.load(d, safety_root) if r.split in ("train", "dev")]
        if d == "chitchat":
            train = [r for r in rows if r.split == "train"]
            rows = sample(train, CHITCHAT_TRAIN_ROWS)
            picked = {r.uid for r in rows}
            rows += [r for r in train if r.uid not in picked and FAREWELL_WORDS.search(r.text)]
        if d in VIOLENCE_ONLY_NEGATIVES:
            rows = [replace(r, labels={"violence": r.labels["violence"]}) for r in rows]
        out.extend(rows)
    out.extend(prose_passages([e for e in out if e.dataset == "epie"]))
    out.extend(self_harm_sentences(out))
    out.extend(contrast_examples())
    out.extend(emoji_negatives(out))
    return out


#: a sentence that speaks of suicide or self-harm (:func:`self_harm_sentences`); matched case-insensitively
SELF_HARM_CUES = re.compile(
    r"\b(?:kill(?:ing)? myself|suicid\w*|end(?:ing)? (?:it all|my life|my own life|things)|(?:want|wanted|wanna|going) to die|"
    r"(?:don'?t|do not) want to (?:live|be alive|exist|wake up|be here)|better off dead|take my (?:own )?life|"
    r"no reason to (?:live|go on)|can'?t (?:go on|do this anymore|take (?:it|this) anymore)|(?:cut|cutting|hurt|hurting) myself|"
    r"overdose|self[- ]harm)\b", re.IGNORECASE)
#: the words a sentence of :func:`self_harm_sentences` has, at least and at most
SELF_HARM_SENTENCE_WORDS = (3, 20)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


def self_harm_sentences(examples: list[D.Example]) -> list[D.Example]:
    """Short ``self-harm`` rows (dataset ``suicide_sentences``, train only): every sentence of
    :data:`SELF_HARM_SENTENCE_WORDS` words of a Suicide Detection *train* post that matches :data:`SELF_HARM_CUES`,
    labelled as its post (r/SuicideWatch 1, r/teenagers 0; ``self-harm`` only). 793 positives and 18 negatives on
    the 2026-12-04 data.

    Why: every ``self-harm`` positive was a Reddit post of up to 40 words while the short training texts (Chit-Chat,
    farewells, fragments) were all negatives, and the encoder fine-tuned on four layers learnt length: "I don't want
    to live anymore" 0.76 → 0.33, "I want to die" 0.48 → 0.15 (docs/text-moderation.md, "All six layers fine-tuned")."""
    out = []
    for e in examples:
        if e.dataset != "suicide_detection" or e.split != "train":
            continue
        for k, m in enumerate(_SENTENCE.finditer(e.text)):
            s = m.group().strip()
            lo, hi = SELF_HARM_SENTENCE_WORDS
            if lo <= len(s.split()) <= hi and SELF_HARM_CUES.search(s):
                out.append(D.Example(s, {"self-harm": e.labels["self-harm"]}, "suicide_sentences", "train", f"{e.uid}:s{k}"))
    return out


#: short abusive fragments (:func:`short_fragments`) fitted: a hashed sample of this many, and as many benign ones.
SHORT_FRAGMENT_ROWS = 4000
#: a span's word this long or longer pairs it with a normal post that uses the word (:func:`short_fragments`).
PAIRED_WORD_MIN_CHARS = 3


def _longest_run(flags: tuple[int, ...]) -> tuple[int, int]:
    """``(start, length)`` of the longest run of 1s in ``flags`` (the first on ties; ``(0, 0)`` if none)."""
    best, start = (0, 0), 0
    for flag, run in itertools.groupby(flags):
        length = len(list(run))
        if flag and length > best[1]:
            best = (start, length)
        start += length
    return best


def short_fragments(examples: list[D.Example], n: int = SHORT_FRAGMENT_ROWS) -> list[D.Example]:
    """Short rows, train only, in one dataset ``hatexplain_fragments`` with both classes at equal weight:

    * positives: the longest run of 2-8 rationale tokens (the words the annotators marked as the reason) of each
      offensive HateXplain *train* post, with the post's labels; a hashed sample of ``n``;
    * negatives: for each positive, a run of as many tokens from a *normal* HateXplain train post, every label 0:
      where normal posts use a word of the span (:data:`PAIRED_WORD_MIN_CHARS` letters or more, and not profane to
      alt-profanity-check: never a slur or a swear word), one of them and a
      run that holds that word, else any normal post and run (word, post and start chosen by sha256 of the
      positive's uid). A group's name is then more nearly as common in the negatives as in the positives ("jews":
      171 positives, 20 negatives with a random partner, 82 paired).

    Returns ``list[Example]``: the ``min(n, spans)`` positives, then their partners in the same order, less every
    partner whose text (lower-cased) is an abusive fragment's (127 of 4,000 partners were, a contradictory row each,
    in the rows of the encoder of 2026-12-03-f8525f07: docs/text-moderation.md).

    Chit-Chat's short lines are negatives, and without short positives a fine-tuned encoder read any short message
    as chat ("you fucking idiot" 0.28); with the spans alone it read any short text as abuse ("I want to die"
    offensive 0.63, docs/text-moderation.md). Pairing by length leaves length carrying no signal."""
    from rtaudit.modelbuild.text.evaluation import sample

    train = [e for e in examples if e.dataset == "hatexplain" and e.split == "train"]
    normal = [e for e in train if not e.labels.get("offensive") and not e.labels.get("hate") and len(e.tokens) >= 8]
    positives = []
    for e in train:
        if not e.labels.get("offensive") or not any(e.rationale):
            continue
        lo, length = _longest_run(e.rationale)
        if 2 <= length <= 8:
            positives.append(D.Example(" ".join(e.tokens[lo:lo + length]), dict(e.labels), "hatexplain_fragments",
                                       "train", f"{e.uid}:span"))
    positives = sample(positives, n)
    # where the normal posts use a word of the span, the negative is a run around that word, so that a word the
    # normal posts also use ("muslims", "women", "white") carries no signal, only the words around it
    # (a word alt-profanity-check reads as profane, a slur or a swear word, is never a pairing word)
    from rtaudit.engine.models.profanity import ProfanityScorer

    by_word: dict[str, list[D.Example]] = {}
    for e in normal:
        for w in {t.lower() for t in e.tokens if len(t) >= PAIRED_WORD_MIN_CHARS}:
            by_word.setdefault(w, []).append(e)
    words = sorted(by_word)
    profane = ProfanityScorer().score_texts(words) >= 0.5 if words else np.zeros(0, bool)
    by_word = {w: by_word[w] for w, bad in zip(words, profane) if not bad}
    out = list(positives)
    abusive = {p.text.lower() for p in positives}
    for p in positives:
        h = int.from_bytes(hashlib.sha256(f"{D.SPLIT_SEED}:{p.uid}:benign".encode()).digest()[:8], "big")
        length = len(p.text.split())
        shared = sorted({w for w in p.text.lower().split() if by_word.get(w)})
        if shared:
            word = shared[h % len(shared)]
            src = by_word[word][(h >> 16) % len(by_word[word])]
            at = next(i for i, t in enumerate(src.tokens) if t.lower() == word)
            lo = max(0, min(at - (h >> 40) % length, len(src.tokens) - length))
        else:
            src = normal[h % len(normal)]
            lo = (h >> 32) % (len(src.tokens) - length + 1)
        text = " ".join(src.tokens[lo:lo + length])
        if text.lower() in abusive:
            continue  # the words of an abusive fragment: no contradictory row
        out.append(D.Example(text, {c: 0 for c in p.labels}, "hatexplain_fragments", "train", f"{src.uid}:{lo}:{length}:benign"))
    return out


def category_weights(cat: str, examples: list[D.Example], y: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Sample weights ``float64[train.sum()]`` of category ``cat`` on the rows ``examples[train]``
    (``y``: ``int[n]`` labels of ``cat``, ``train``: ``bool[n]``): :func:`balanced_weights` per
    (dataset, class), times :data:`DATASET_WEIGHT`, times :data:`HARD_NEGATIVE_WEIGHT` on the negatives
    that match the category's :data:`HARD_NEGATIVES` pattern (``violence``: a violent word; ``self-harm``: a farewell)."""
    datasets = np.array([e.dataset for e in examples])
    weights = balanced_weights(y[train], datasets[train])
    balanced = IDENTITY_BALANCED.get(cat, frozenset())
    if balanced:
        on = np.isin(datasets[train], list(balanced))
        keys = np.array([identity_key(e.text) or "" if e.dataset in balanced else "" for e in examples])
        weights[on] *= identity_balanced(y[train][on], datasets[train][on], keys[train][on])
    for d, (positive, negative) in DATASET_WEIGHT.get(cat, {}).items():
        weights[(datasets[train] == d) & (y[train] == 1)] *= positive
        weights[(datasets[train] == d) & (y[train] == 0)] *= negative
    pattern = HARD_NEGATIVES.get(cat)
    if pattern is not None:
        hard = np.array([y_ == 0 and pattern.search(e.text) is not None for e, y_ in zip(examples, y)])
        weights[hard[train]] *= HARD_NEGATIVE_WEIGHT
    return weights


def unlabel_profane_contrasts(examples: list[D.Example], lexical_prob: np.ndarray) -> list[D.Example]:
    """``examples`` with the ``offensive`` label dropped from non-hateful HatemojiBuild rows that
    alt-profanity-check scores ≥ 0.5 (``lexical_prob[n]``, on the normalized text).

    HatemojiBuild's "not hateful" class also holds abuse at no protected group ("shut up you prune!
    😡", "fuck off 😡"): offensive in this taxonomy, so not a negative for ``offensive``; HatemojiBuild
    does not say which rows they are, and alt-profanity-check picks about a quarter of them. As
    negatives they taught that insults are harmless ("you 🐷" 0.67 → 0.43).

    Chit-Chat's messages keep every label: of its 219,036 distinct messages 176 use a swear word or an
    insult, nearly all "stupid" about a thing ("such a stupid thing to do"), while alt-profanity-check
    flags 1.8 % of them, mostly the negatives the head should learn ("Tests suck", "that would be sick",
    "My wife is a cancer nurse")."""
    out = []
    for e, p in zip(examples, lexical_prob):
        if e.dataset == "hatemoji_build" and e.labels.get("offensive") == 0 and p >= 0.5:
            e = replace(e, labels={k: v for k, v in e.labels.items() if k != "offensive"})
        out.append(e)
    return out


def safety_training_files(safety_root: Path) -> dict[str, str]:
    """sha256 of every safety data file training reads, by path relative to ``safety_root``."""
    return {str(p.relative_to(safety_root)): sha256_file(p) for p in D.required_safety_files(safety_root)}

