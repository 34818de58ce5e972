"""The text scorer's runtime (pure code, no Kafka): what serving loads to score texts.

- :mod:`rtaudit.engine.text.normalize`: what a user wrote → what the models see, with an offset map back
  (:mod:`~rtaudit.engine.text.separators`, :mod:`~rtaudit.engine.text.lexicon` and
  :mod:`~rtaudit.engine.text.emoji_names` are its parts).
- :mod:`rtaudit.engine.text.encoder`: the MiniLM-L6 sentence encoder on onnxruntime
  (:mod:`~rtaudit.engine.text.encoder_build`: its ONNX graphs built and cached, fp32, int8 and fp16;
  :mod:`~rtaudit.engine.text.encoder_delta`: the fine-tuned layers' deltas applied over it).
- :mod:`rtaudit.engine.text.heads`: the trained classifiers over its embeddings; their files are in ``artifacts/``.
- :mod:`rtaudit.engine.text.windows`: which windows of a long text the encoder reads.
- :mod:`rtaudit.engine.text.multilingual`: language detection and routing to the per-language models.
- :mod:`rtaudit.engine.text.scoring`: raw texts → category scores and evidence spans.

The models' training data, training and evaluation suites are in :mod:`rtaudit.modelbuild.text`;
nothing here imports them.
"""
