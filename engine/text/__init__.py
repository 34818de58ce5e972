"""Text preprocessing for the text models: evasion-resistant normalization with an offset map.

Pure code, no Kafka. :mod:`engine.text.normalize` turns what a user wrote into
what the models see; :mod:`engine.text.evasion` builds the evasion suite and the
benign list that measure it.
"""

from engine.text.normalize import NormalizedText, normalize

__all__ = ["NormalizedText", "normalize"]
