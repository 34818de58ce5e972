"""Evaluation of the speech path (:mod:`~rtaudit.modelbuild.audio.evaluation`: word error rate)."""
