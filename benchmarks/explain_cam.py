"""Grad-CAM vs Grad-CAM++ on the open_nsfw torch copy (issue 38): time per explanation, heatmap
bytes, localization against NudeNet's boxes, deletion and insertion AUC.

Usage: ``python benchmarks/explain_cam.py [--rounds 5] [--device cpu|cuda] [--threads N]
[--photos ../shared/data/images/photos] [--people DIR]``

Images: every colour or grey photo scikit-image ships in its wheel (CC0 / public domain,
``skimage/data/README.txt``), plus ``--photos`` when that folder exists. Reference boxes are
the NudeNet 320n detector's own detections (the served image stage, every class, benign ones
such as faces included) on the same images; only images with a box count for localization.

* **time**: forward, backward and map (:meth:`CamExplainer.explain_input`), preprocessing
  excluded, ``--rounds`` per image after one warm-up; median and P90 over all. The served
  onnxruntime forward and the torch copy's forward without gradients are timed alongside;
  the four alternate on every image and round.
* **bytes**: the evidence PNG (longest side 64 px, at most 8 KiB) and its base64 length.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch and onnxruntime intra-op threads (0: default)")
    ap.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "data" / "images" / "photos",
                    help="a folder of more photos (docs/explanations.md lists the public-domain photos of people used)")
    ap.add_argument("--people", type=Path, help="a folder of photos of people (docs/explanations.md lists the public-domain ones used)")
    args = ap.parse_args()

    import torch
    from rtaudit.modelbuild.explain import evaluation as ev
    from rtaudit.engine.explain.cam import CamExplainer
    from rtaudit.engine.explain.classifier import OpenNSFW, preprocess

    if args.threads:
        torch.set_num_threads(args.threads)
    images = ev.photo_corpus(args.photos)
    people_names = {"astronaut.png", "camera.png"}
    if args.people is not None:
        known = {name for name, _ in images}
        extra = [(n, rgb) for n, rgb in ev.photo_corpus(args.people) if n not in known]
        images += extra
        people_names |= {n for n, _ in extra}
    served = OpenNSFW(prefer_gpu=args.device != "cpu", intra_op_threads=args.threads)
    copy = served.torch_copy(args.device)
    print(f"open_nsfw {served.model.version}: {len(images)} images; conversion {copy.convert_s:.2f} s; "
          f"device {args.device}; torch {torch.__version__}, {torch.get_num_threads()} threads; load {os.getloadavg()}")

    inputs = [(name, preprocess(rgb), (rgb.shape[1], rgb.shape[0])) for name, rgb in images]
    explainers = {m: CamExplainer(copy, m) for m in ("gradcam", "gradcam++")}
    times: dict[str, list[float]] = {k: [] for k in ("ort", "fwd", "gradcam", "gradcam++")}
    sizes: dict[str, list[int]] = {"gradcam": [], "gradcam++": []}
    # the four measurements alternate on every image and round, so a load spike from other
    # processes on this shared machine hits all of them alike
    for _, x, size in inputs:
        for r in range(args.rounds + 1):
            t = time.perf_counter(); served.probabilities(x[None]); a = (time.perf_counter() - t) * 1000
            t = time.perf_counter(); copy.probabilities(x[None]); b = (time.perf_counter() - t) * 1000
            if r:
                times["ort"].append(a); times["fwd"].append(b)
            for method, explainer in explainers.items():
                for other in explainers.values():
                    (other.extractor.enable_hooks if other is explainer else other.extractor.disable_hooks)()
                heat = explainer.explain_input(x, size)
                if args.device != "cpu":
                    torch.cuda.synchronize()
                if r:
                    times[method].append(heat.compute_ms)
        for method, explainer in explainers.items():
            for other in explainers.values():
                (other.extractor.enable_hooks if other is explainer else other.extractor.disable_hooks)()
            sizes[method].append(len(explainer.explain_input(x, size).png()))
    for explainer in explainers.values():
        explainer.close()
    rows = [("served graph forward (onnxruntime)", times["ort"], None), ("torch copy forward (no grad)", times["fwd"], None),
            ("gradcam explanation", times["gradcam"], sizes["gradcam"]), ("gradcam++ explanation", times["gradcam++"], sizes["gradcam++"])]

    print(f"\n{'what':<36} {'ms p50':>8} {'ms p90':>8} {'PNG bytes mean':>15} {'max':>6} {'base64 max':>11}")
    for what, times, sizes in rows:
        b = f"{statistics.mean(sizes):>15.0f} {max(sizes):>6} {len(base64.b64encode(bytes(max(sizes)))):>11}" if sizes else f"{'':>15} {'':>6} {'':>11}"
        print(f"{what:<36} {pct(times, 50):>8.1f} {pct(times, 90):>8.1f} {b}")

    labelled = ev.detector_labelled(images)
    print(f"\nLocalization vs NudeNet 320n boxes ({len(labelled)} images with a box: "
          + ", ".join(f"{i.name} [{i.source}]" for i in labelled) + ")")
    print(f"{'method':<10} {'threshold':>9} {'mean IoU':>9} {'IoU>=0.5':>9} {'pointing':>9}  per image (IoU)")
    for threshold in (0.5, 0.15, 0.3, 0.7, 0.9):
        for method in ("gradcam++", "gradcam"):
            explainer = CamExplainer(copy, method)
            loc = ev.localization(explainer, labelled, threshold=threshold)
            explainer.close()
            per = " ".join(f"{n}={v:.2f}{'*' if hit else ''}" for n, v, hit in loc.per_image)
            print(f"{method:<10} {threshold:>9.2f} {loc.mean_iou:>9.3f} {loc.share_iou_50:>9.3f} {loc.pointing:>9.3f}  {per}")

    for side in (0.5, 0.3):
        loc = ev.centre_baseline(labelled, side)
        per = " ".join(f"{n}={v:.2f}{'*' if hit else ''}" for n, v, hit in loc.per_image)
        print(f"{loc.method:<10} {'-':>9} {loc.mean_iou:>9.3f} {loc.share_iou_50:>9.3f} {loc.pointing:>9.3f}  {per}")
    people = [i for i in labelled if i.name in people_names]
    if people:
        print(f"\nOnly the photos of people ({len(people)}: scikit-image's astronaut and camera, and --people):")
        for threshold in (0.5, 0.15):
            for method in ("gradcam++", "gradcam"):
                explainer = CamExplainer(copy, method)
                loc = ev.localization(explainer, people, threshold=threshold)
                explainer.close()
                print(f"{method:<10} {threshold:>9.2f} {loc.mean_iou:>9.3f} {loc.share_iou_50:>9.3f} {loc.pointing:>9.3f}")
        loc = ev.centre_baseline(people, 0.5)
        print(f"{loc.method:<10} {'-':>9} {loc.mean_iou:>9.3f} {loc.share_iou_50:>9.3f} {loc.pointing:>9.3f}")
    print("P(nsfw) of the torch copy per image with a box: "
          + " ".join(f"{i.name}={copy.probabilities(preprocess(i.rgb)[None])[0][1]:.3f}" for i in labelled))

    print(f"\nDeletion / insertion AUC of P(nsfw) ({len(images)} images, 20 steps; deletion lower is better, insertion higher)")
    print(f"{'method':<10} {'deletion':>9} {'insertion':>10}")
    for method in ("gradcam++", "gradcam"):
        explainer = CamExplainer(copy, method)
        f = ev.deletion_insertion(explainer, [rgb for _, rgb in images])
        explainer.close()
        print(f"{method:<10} {f.deletion_auc:>9.4f} {f.insertion_auc:>10.4f}")
    print(f"\nload after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
