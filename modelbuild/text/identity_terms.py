"""Identity terms: which group, if any, a text names first (the key of the identity-balanced sample weights,
:func:`rtaudit.modelbuild.text.training_data.identity_balanced`).

The terms are the 50 identity adjectives of Dixon, Li, Sorensen, Thain and Vasserman (2018), "Measuring and
Mitigating Unintended Bias in Text Classification" (AIES), as published in ``conversationai/unintended-ml-bias-analysis``
@ ``ff0f436`` ``unintended_ml_bias/bias_madlibs_data/adjectives_people.txt`` (Apache-2.0), with their plural and noun
forms ("Jews", "Muslims", "gays"), less the six with an everyday sense that names no group here ("straight", "old",
"older", "young", "younger", "millenial" as spelt), plus the nouns hate data most often targets that are not adjectives
(women, men, immigrants, refugees, migrants, Arabs, Hindus, Roma, disabled people). Slurs are not identity terms:
they are evidence of hate, and balancing them away would teach the head to ignore them.

Pure and deterministic; knows nothing about training.
"""

from __future__ import annotations

import re

#: group key → the words (regular expressions, matched whole and case-insensitively) that name it
IDENTITY_TERMS: dict[str, str] = {
    "lesbian": r"lesbians?", "gay": r"gays?", "bisexual": r"bisexuals?|bi people",
    "trans": r"transgenders?|trans|transsexuals?", "queer": r"queers?", "lgbt": r"lgbt\w*",
    "homosexual": r"homosexuals?", "heterosexual": r"heterosexuals?", "male": r"males?", "female": r"females?",
    "nonbinary": r"non-?binary", "african": r"africans?|african americans?", "black": r"blacks?",
    "white": r"whites?", "european": r"europeans?", "hispanic": r"hispanics?",
    "latino": r"latin[oa]s?|latinx", "mexican": r"mexicans?", "canadian": r"canadians?",
    "american": r"americans?", "asian": r"asians?", "indian": r"indians?", "middle_eastern": r"middle eastern",
    "chinese": r"chinese", "japanese": r"japanese", "christian": r"christians?|christianity",
    "muslim": r"muslims?|islam|islamic", "jewish": r"jews?|jewish|judaism", "buddhist": r"buddhists?",
    "catholic": r"catholics?", "protestant": r"protestants?", "sikh": r"sikhs?", "taoist": r"taoists?",
    "hindu": r"hindus?", "arab": r"arabs?", "roma": r"roma|romani|gypsy|gypsies", "teenage": r"teenage(?:rs?)?",
    "elderly": r"elderly", "middle_aged": r"middle[- ]aged", "blind": r"blind", "deaf": r"deaf",
    "paralyzed": r"paraly[sz]ed", "disabled": r"disabled|disabilit(?:y|ies)",
    "women": r"wom[ae]n|girls?", "men": r"men", "immigrant": r"immigrants?|immigration|migrants?|foreigners?",
    "refugee": r"refugees?|asylum seekers?",
}
_PATTERN = re.compile("|".join(f"(?P<{key}>\\b(?:{words})\\b)" for key, words in IDENTITY_TERMS.items()),
                      re.IGNORECASE)


def identity_key(text: str) -> str | None:
    """The key of :data:`IDENTITY_TERMS` whose word comes first in ``text`` ("Jews and Muslims" → ``"jewish"``), or
    ``None`` when ``text`` names no group of the list."""
    m = _PATTERN.search(text)
    return m.lastgroup if m else None
