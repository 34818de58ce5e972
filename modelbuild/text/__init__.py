"""The text models' building: datasets and splits (:mod:`~rtaudit.modelbuild.text.data`,
:mod:`~rtaudit.modelbuild.text.multilingual_data`), training data and written contrasts, training
(:mod:`~rtaudit.modelbuild.text.train`, :mod:`~rtaudit.modelbuild.text.multilingual_train`),
fine-tuning (:mod:`~rtaudit.modelbuild.text.finetune`), and what ``rtaudit eval`` measures
(:mod:`~rtaudit.modelbuild.text.evaluation`, the functional, evasion and robustness suites, the
benign lists). The scorer they train and measure is :mod:`rtaudit.engine.text`."""
