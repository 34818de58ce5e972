"""The centre-prior baseline a heatmap's localization is compared with (``rtaudit eval --explain``)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torchcam", reason="the explain extra is not installed (`make setup` installs it)")


def test_centre_baseline_scores_a_centred_box_and_misses_a_corner_one() -> None:
    from rtaudit.modelbuild.explain.evaluation import LabelledImage, centre_baseline

    rgb = np.zeros((200, 400, 3), np.uint8)
    centred = LabelledImage("centred", rgb, ((100, 50, 200, 100),))  # exactly the centre half
    corner = LabelledImage("corner", rgb, ((0, 0, 40, 40),))
    unboxed = LabelledImage("none", rgb, ())
    loc = centre_baseline([centred, corner, unboxed])
    assert loc.images == 2 and loc.method == "centre 50% box"
    assert dict((n, (round(v, 6), hit)) for n, v, hit in loc.per_image) == {"centred": (1.0, True), "corner": (0.0, False)}
    assert (loc.mean_iou, loc.share_iou_50, loc.pointing) == (0.5, 0.5, 0.5)


def test_centre_baseline_refuses_what_it_cannot_score() -> None:
    from rtaudit.modelbuild.explain.evaluation import LabelledImage, centre_baseline

    with pytest.raises(ValueError, match="no image with a reference box"):
        centre_baseline([LabelledImage("none", np.zeros((8, 8, 3), np.uint8), ())])
    with pytest.raises(ValueError, match="outside"):
        centre_baseline([], side=0.0)
