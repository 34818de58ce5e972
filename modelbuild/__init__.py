"""Model building, apart from serving: corpora, training data, training, fine-tuning and evaluation.

It may import :mod:`rtaudit.engine` (the models it builds and measures); the engine never imports it,
so serving loads none of it (tests/unit/test_serving_imports.py checks ``sys.modules``).

- :mod:`rtaudit.modelbuild.text`: the text models' data, training, fine-tuning and evaluation suites.
- :mod:`rtaudit.modelbuild.audio`: word error rate of the speech path.
- :mod:`rtaudit.modelbuild.explain`: localization and faithfulness of the heatmaps.
"""
