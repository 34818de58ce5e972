"""Text preprocessing for the text models and the suite that measures it (pure code, no Kafka).

- :mod:`rtaudit.engine.text.normalize`: what a user wrote → what the models see, with an offset map back.
- :mod:`rtaudit.engine.text.evasion`: deterministic obfuscated variants of a clean text (the evasion suite).
- :mod:`rtaudit.engine.text.benign`: texts no model should flag (Scunthorpe words, Russian, Chinese, IDs, …).
- :mod:`rtaudit.engine.text.robustness`: recall per evasion technique and benign false positives for any scorer.
"""

from rtaudit.engine.text.benign import BENIGN, BENIGN_CATEGORIES, BENIGN_TEXTS, BenignText
from rtaudit.engine.text.evasion import TECHNIQUES, evasion_variant, evasion_variants
from rtaudit.engine.text.normalize import NormalizedText, normalize
from rtaudit.engine.text.robustness import EvasionReport, evasion_report, format_reports, newly_flagged, normalized

__all__ = [
    "BENIGN",
    "BENIGN_CATEGORIES",
    "BENIGN_TEXTS",
    "TECHNIQUES",
    "BenignText",
    "EvasionReport",
    "NormalizedText",
    "evasion_report",
    "evasion_variant",
    "evasion_variants",
    "format_reports",
    "newly_flagged",
    "normalize",
    "normalized",
]
