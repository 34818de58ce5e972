"""Written context contrasts: insults, dehumanising words and threats negated, condemned or reported (training
negatives of the abuse categories and ``violence``), their direct forms (positives) and everyday statements naming
a group (negatives).

Written for this project (no data set), like :mod:`rtaudit.modelbuild.text.contrasts`, and used only as
*training* rows (:func:`rtaudit.modelbuild.text.training_data.english_examples`): the public sets hold
almost no abuse words in a negated, counter-speech or reporting frame, so a head fitted on them reads
"I am not an idiot" and "Please don't call women bitches" as the insult itself (issue 12: 0.94 and 0.93).

Kept apart from every evaluation set, so that the functional suite measures generalisation to new wordings
rather than recall of these: the insults, groups, dehumanising words, verbs and sentence frames here are
not those of :mod:`rtaudit.modelbuild.text.functional` (a unit test checks that no word of its lexicon and no
text of the suite, the benign list or the probes appears here).

Each frame family has its *direct* counterpart written with the same words (:func:`direct_forms`): the insult
said, the derogation asserted, the threat made. They are the positives of the same dataset, so that the words
alone carry no signal and only the frame separates the classes (counterfactually augmented data, Kaushik, Hovy
and Lipton 2020, "Learning the Difference that Makes a Difference with Counterfactually-Augmented Data", ICLR):
as negatives alone the contrasts pulled every direct insult under the line (docs/text-moderation.md, run A).
"""

from __future__ import annotations

#: (singular with article, plural): none is in the functional suite's ``INSULTS``
INSULTS: tuple[tuple[str, str], ...] = (
    ("a jerk", "jerks"), ("a clown", "clowns"), ("a fool", "fools"), ("a dumbass", "dumbasses"),
    ("a creep", "creeps"), ("a failure", "failures"), ("a freak", "freaks"), ("a dimwit", "dimwits"),
)
#: groups not in the functional suite's ``GROUPS``
GROUPS: tuple[str, ...] = ("Christians", "Hindus", "Asians", "Mexicans", "refugees", "Roma people", "lesbians",
                           "old people", "Arabs", "Latinos")
#: dehumanising words not in the functional suite's ``DEHUMANISING``
DEHUMANISING: tuple[str, ...] = ("pigs", "snakes", "leeches", "insects", "filth", "savages", "a plague", "locusts")
#: violent verbs not in the functional suite's ``VERBS``
VERBS: tuple[str, ...] = ("beat", "punch", "murder", "attack", "burn")

_INSULT_NEGATED = ("You're not {a} at all.", "Honestly, she isn't {a}.", "Don't worry, nobody thinks you're {a}.",
                   "I never said you were {a}.", "My brother is no {a}, he's brilliant.", "You are far from {a}.")
_INSULT_COUNTER = ("Stop calling people {plural}, it's cruel.",
                   "My son came home upset because a classmate called him {a}.",
                   "Calling your coworkers {plural} will get you fired.", "Bullies called me {a} every day at school.",
                   "The teacher told the class that calling someone {a} is bullying.",
                   "I reported the account that kept calling me {a}.")
_GROUP_NEGATED = ("{G} aren't {d}.", "It's a lie that {g} are {d}.", "No, {g} are not {d}, they're people like us.",
                  "I refuse to believe that {g} are {d}.")
_GROUP_COUNTER = ("Comparing {g} to {d} is dehumanising and wrong.", "People who call {g} {d} are spreading hate.",
                  "We must push back whenever anyone says {g} are {d}.")
_GROUP_REPORTING = ("The historian explained how the regime described {g} as {d}.",
                    "The article quotes a politician who called {g} {d}.",
                    "Researchers collected posts claiming that {g} are {d}.",
                    "The court convicted a man who wrote online that {g} were {d}.")
_THREAT_NEGATED = ("No one here wants to {v} you.", "I'd never {v} anyone.",
                   "Don't be scared, he isn't going to {v} you.", "He promised he would never {v} anyone again.")


_IDENTITY_POSITIVE = ("Our town is lucky to have so many {g}.", "{G} have made this country better.",
                      "I'm proud of my {g} friends.", "The festival celebrates the culture of {g}.")

#: everyday statements naming a group (neutral facts, lived experience, rights): the negatives that balance the
#: direct group derogation, so that naming a group carries no signal (none is a frame of the functional suite's)
_IDENTITY_NEUTRAL = ("Many {g} live in this neighbourhood.", "{G} celebrate their holidays with family and friends.",
                     "The museum has a new exhibition about the history of {g}.",
                     "I met two {g} at the conference yesterday.", "Our school has teachers who are {g}.",
                     "{G} come from many different backgrounds.", "The survey asked {g} about their jobs and housing.",
                     "My best friend's parents are {g}.", "There is a community centre for {g} near the station.",
                     "Some of the nurses at the clinic are {g}.", "{G} have lived in this region for centuries.",
                     "Thank you to all the {g} who volunteered this weekend.",
                     "{G} deserve the same rights as everyone else.", "I grew up next door to {g}.")

_INSULT_DIRECT = ("You're {a}, honestly.", "Honestly, she's such {a}.", "Everybody at work thinks you're {a}.",
                  "I said it before and I'll say it again: you are {a}.", "Be quiet, you stupid {bare}.",
                  "You are {a} and everyone knows it.", "All of you are {plural}.", "Get lost, {bare}.",
                  "Only {plural} like you post this garbage.", "What {a_bare} you are.", "You absolute {bare}.",
                  "Nobody likes you, you {bare}.")
_GROUP_DIRECT = ("Honestly, {g} are just {d}.", "{G}? Nothing more than {d}.", "Everyone knows {g} are {d}.",
                 "{G} are {d} and should get out of our country.", "I can't stand {g}, they're {d}.",
                 "Let's be honest, {g} are {d}.", "{G} are {d}, all of them.", "Never trust {g}, they are {d}.",
                 "{G} breed like {d}.", "Our country is overrun by {g}, they are {d}.", "{G} are {d}, period.")
_THREAT_DIRECT = ("Keep talking and I'll {v} you.", "I swear I'll {v} you.", "Next time I see you I'll {v} you.",
                  "Come outside so I can {v} you.", "One more word and I {v} you.",
                  "I'm coming over to {v} you right now.", "Tonight I {v} you, just wait.",
                  "You're dead, I'll {v} you myself.")


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def abuse_contrasts() -> tuple[str, ...]:
    """Insults and group derogation negated, condemned or reported: negatives of ``offensive``, ``hate``,
    ``targeted_insult`` and ``violence``; deterministic, in template order (words rotate with the template)."""
    out = [t.format(a=a, plural=p) for t in _INSULT_NEGATED + _INSULT_COUNTER for a, p in INSULTS]
    frames = _GROUP_NEGATED + _GROUP_COUNTER + _GROUP_REPORTING
    out += [t.format(g=g, G=_cap(g), d=DEHUMANISING[(i + k) % len(DEHUMANISING)])
            for i, t in enumerate(frames) for k, g in enumerate(GROUPS)]
    return tuple(out)


def threat_contrasts() -> tuple[str, ...]:
    """Violence negated: negatives of ``violence`` and of the abuse categories; deterministic."""
    return tuple(t.format(v=v) for t in _THREAT_NEGATED for v in VERBS)


def identity_contrasts() -> tuple[str, ...]:
    """The groups in positive statements: negatives of the abuse categories; deterministic."""
    return tuple(t.format(g=g, G=_cap(g)) for t in _IDENTITY_POSITIVE for g in GROUPS)


def identity_statements() -> tuple[str, ...]:
    """Every group of :data:`GROUPS` in every neutral frame: ``tuple[str, ...]`` (140), deterministic, in frame order."""
    return tuple(t.format(g=g, G=_cap(g)) for t in _IDENTITY_NEUTRAL for g in GROUPS)


def direct_forms() -> dict[str, tuple[str, ...]]:
    """The positives: ``{"insult": …, "group": …, "threat": …}``, each the direct counterpart of a contrast
    family in the same words (see the module docstring): 96 insults, 110 derogations, 40 threats (246 in all)."""
    insults = [t.format(a=a, bare=a.split()[-1], plural=p, a_bare=a) for t in _INSULT_DIRECT for a, p in INSULTS]
    groups = [t.format(g=g, G=_cap(g), d=DEHUMANISING[(i + k) % len(DEHUMANISING)])
              for i, t in enumerate(_GROUP_DIRECT) for k, g in enumerate(GROUPS)]
    threats = [t.format(v=v) for t in _THREAT_DIRECT for v in VERBS]
    return {"insult": tuple(insults), "group": tuple(groups), "threat": tuple(threats)}


#: every written context contrast (see the module docstring)
CONTEXT_CONTRASTS: tuple[str, ...] = abuse_contrasts() + threat_contrasts() + identity_contrasts()
#: every written neutral statement naming a group (:func:`identity_statements`)
IDENTITY_STATEMENTS: tuple[str, ...] = identity_statements()
#: every written direct form (:func:`direct_forms`)
DIRECT_FORMS: tuple[str, ...] = tuple(t for family in direct_forms().values() for t in family)


def context_examples():
    """:data:`CONTEXT_CONTRASTS` and :data:`DIRECT_FORMS` as ``train`` rows (dataset ``context_contrasts``):
    ``list[Example]``.

    * contrasts: negative for ``offensive``, ``hate``, ``targeted_insult`` and ``violence``;
    * direct insults: ``offensive`` and ``targeted_insult`` 1, ``hate`` and ``violence`` 0;
    * direct group derogation: ``offensive`` and ``hate`` 1, ``violence`` 0;
    * direct threats: ``violence`` and ``offensive`` 1, ``hate`` 0;
    * :data:`IDENTITY_STATEMENTS` (dataset ``identity_statements``): ``offensive``, ``hate`` and
      ``targeted_insult`` 0.

    ``self-harm`` is never labelled here."""
    from rtaudit.modelbuild.text import data as D

    neg = {"offensive": 0, "hate": 0, "targeted_insult": 0, "violence": 0}
    labels = {"insult": {"offensive": 1, "targeted_insult": 1, "hate": 0, "violence": 0},
              "group": {"offensive": 1, "hate": 1, "violence": 0},
              "threat": {"violence": 1, "offensive": 1, "hate": 0}}
    rows = [D.Example(t, dict(neg), "context_contrasts", "train", f"context:{i}") for i, t in enumerate(CONTEXT_CONTRASTS)]
    for family, texts in direct_forms().items():
        rows += [D.Example(t, dict(labels[family]), "context_contrasts", "train", f"direct:{family}:{i}")
                 for i, t in enumerate(texts)]
    # their own dataset, so that they add a (dataset, class) cell rather than thin the contrasts' negative one
    rows += [D.Example(t, {"offensive": 0, "hate": 0, "targeted_insult": 0}, "identity_statements", "train",
                       f"identity:{i}") for i, t in enumerate(IDENTITY_STATEMENTS)]
    return rows
