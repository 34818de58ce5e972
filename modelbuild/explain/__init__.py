"""Evaluation of the explanation heatmaps (:mod:`~rtaudit.modelbuild.explain.evaluation`)."""
