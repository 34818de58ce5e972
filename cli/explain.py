"""``rtaudit explain REQUEST_ID``: ask the explain role for heatmaps of a request's image parts
and write each as a PNG (over the image when ``--image`` gives it); and the lines
``rtaudit verdicts --explanations`` prints under a verdict."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.explain import Explanation
from rtaudit.cli.common import ConfigOpt, console, fail, settings_or_exit

#: how long to keep collecting a request's other parts after its first answer, s.
SETTLE_S = 2.0


def explanation_line(e: Explanation) -> str:
    """One readable line for an evidence record (printed under its verdict)."""
    if e.status != "ok":
        return f"  explain {e.request_id} {e.part} {e.status}: {e.error_code}: {e.error}"
    return (f"  explain {e.request_id} {e.part} {e.method} {e.target}={e.score:.3f} peak box {list(e.peak_box or ())} "
            f"heatmap {e.heatmap_size[0] if e.heatmap_size else 0}x{e.heatmap_size[1] if e.heatmap_size else 0} "
            f"({e.trigger}, {e.compute_ms:.0f} ms)")


def write_picture(e: Explanation, out: Path, image: Path | None) -> Path:
    """Write ``e``'s heatmap (over ``image`` when given) with its peak box to ``out``.

    Raises:
        ValueError: the record has no heatmap, or ``image`` cannot be read.
    """
    from PIL import Image

    from rtaudit.engine.explain.render import render

    if e.heatmap_png_b64 is None or e.image_size is None:
        raise ValueError(f"{e.request_id} {e.part}: no heatmap ({e.status}: {e.error})")
    base = None
    if image is not None:
        try:
            base = Image.open(image)
            base.load()
        except OSError as exc:
            raise ValueError(f"{image}: {exc}") from None
    render(base64.b64decode(e.heatmap_png_b64), e.image_size, e.peak_box, base).save(out)
    return out


def explain(
    request_id: Annotated[str, typer.Argument(help="the request whose image parts to explain")],
    part: Annotated[Optional[str], typer.Option(help="one image part, e.g. image:0 (default: all)")] = None,
    image: Annotated[Optional[Path], typer.Option(help="the image the request carried, to draw the heatmap over "
                                                  "(default: the heatmap alone)")] = None,
    out: Annotated[Path, typer.Option(help="folder for the PNGs (<request_id>-<part>.png)")] = Path("."),
    timeout: Annotated[float, typer.Option(help="seconds to wait for the explain role")] = 60.0,
    as_json: Annotated[bool, typer.Option("--json", help="print each evidence record as JSON")] = False,
    config: ConfigOpt = None,
) -> None:
    """Ask the explain role (its own consumer group, off the verdict path) for Grad-CAM++ heatmaps of
    REQUEST_ID's image parts, wait for them on audit.explanations and write one PNG per part.
    Exit 1 when none comes within --timeout (is the explain role running?) or none is ``ok``."""
    from rtaudit.workers.client import AuditClient, DeliveryError, explanation_reader
    from rtaudit.workers.kafka import ClusterError

    s = settings_or_exit(config)
    try:
        reader = explanation_reader(s, dedupe=False)
    except ClusterError as exc:
        raise fail(str(exc)) from None
    with reader:
        client = AuditClient(s)
        asked_ms = now_ms()
        client.request_explanation(request_id, part)
        try:
            client.flush()
        except DeliveryError as exc:
            raise fail(str(exc), 1) from None

        def answers(e: Explanation) -> bool:  # ours, not an earlier call's answer still on the topic
            return (e.request_id == request_id and e.trigger == "on_demand" and e.produced_at_ms >= asked_ms
                    and (part is None or e.part == part))

        got: dict[str, Explanation] = {}
        for e, _ in reader.stream(timeout_s=timeout, idle_s=0.2):
            if answers(e):
                got[e.part] = e
                break
        if got and part is None:  # the role sends a request's parts one after the other
            for e, _ in reader.stream(timeout_s=SETTLE_S, idle_s=0.2):
                if answers(e):
                    got[e.part] = e
    if not got:
        raise fail(f"no explanation of {request_id} within {timeout:g} s: is the explain role running "
                   f"(faust -A rtaudit.workers.explain worker; `rtaudit up` starts it)?", 1)
    table = Table("part", "status", "method", "target score", "peak box [x, y, w, h]", "heatmap", "ms", "file",
                  title=f"explanations of {request_id}")
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted(got):
        e = got[name]
        if as_json:
            print(json.dumps(e.model_dump(mode="json", exclude_none=True)))
        written = ""
        if e.status == "ok":
            try:
                written = str(write_picture(e, out / f"{request_id}-{name.replace(':', '')}.png", image))
            except ValueError as exc:
                raise fail(str(exc)) from None
        table.add_row(name, e.status if e.status == "ok" else f"{e.status}: {e.error}", e.method,
                      f"{e.target}={e.score:.4f}" if e.score is not None else "-", str(list(e.peak_box or ())),
                      f"{len(base64.b64decode(e.heatmap_png_b64 or ''))} B" if e.heatmap_png_b64 else "-",
                      f"{e.compute_ms:.0f}", written)
    if not as_json:
        console.print(table)
    if not any(e.status == "ok" for e in got.values()):
        raise typer.Exit(1)


def demo_explanations(settings, items, got, log_dir: Path, timeout_s: float = 120.0) -> int:
    """The demo's explain step: wait for the heatmaps of the ``review``/``block`` verdicts with
    image parts (``got``: request id → (verdict, arrival)), ask one on demand for the first photo,
    print a line each and draw every ``ok`` one over its image into ``log_dir``. Returns how many
    came; a missing one is reported, not fatal (the verdicts are the demo's result)."""
    from rtaudit.schemas.messages import AuditRequest
    from rtaudit.workers.client import AuditClient, explanation_reader
    from rtaudit.workers.explain_loop import image_parts

    images: dict[tuple[str, str], bytes] = {}
    for item in items:
        try:
            req = AuditRequest.model_validate_json(item.raw)
        except ValueError:
            continue
        for i, m in enumerate(req.media):
            if m.data_b64:
                images[(req.request_id, f"image:{i}")] = base64.b64decode(m.data_b64)
    wanted = {f"{rid}/{p}/verdict" for rid, (v, _) in got.items() if v.decision in settings.explain.decisions
              for p in image_parts(v)}
    photo = next((i.request_id for i in items if i.kind == "image" and i.request_id in got), None)
    if photo is not None:
        client = AuditClient(settings)
        client.request_explanation(photo, "image:0")
        client.flush()
        wanted.add(f"{photo}/image:0/on_demand")
    if not wanted:
        return 0
    console.print(f"explanations (explain role, off the verdict path): waiting for {len(wanted)}")
    with explanation_reader(settings) as reader:
        arrived = reader.wait_for(wanted, timeout_s, on_record=lambda e, _: print(explanation_line(e), flush=True))
    for _key, (e, _) in sorted(arrived.items()):
        if e.status == "ok" and (e.request_id, e.part) in images:
            name = f"explain-{e.request_id}-{e.part.replace(':', '')}-{e.trigger}.png"
            render_over(e, images[(e.request_id, e.part)], log_dir / name)
    if len(arrived) < len(wanted):
        console.print(f"[yellow]{len(wanted) - len(arrived)} explanations not in within {timeout_s:g} s[/yellow]")
    console.print(f"heatmaps drawn over their images in {log_dir} (explain-*.png)")
    return len(arrived)


def render_over(e: Explanation, image: bytes, out: Path) -> Path:
    """Write ``e``'s heatmap over the encoded ``image`` bytes to ``out``."""
    import io

    from PIL import Image, ImageOps

    from rtaudit.engine.explain.render import render

    base = ImageOps.exif_transpose(Image.open(io.BytesIO(image)))
    render(base64.b64decode(e.heatmap_png_b64 or ""), e.image_size or base.size, e.peak_box, base).save(out)
    return out


def explain_tables(photos: Path | None) -> list[Table]:
    """``rtaudit eval --explain``: localization of Grad-CAM++ and Grad-CAM against NudeNet 320n's
    boxes (peak box at two thresholds: mean IoU, share at IoU >= 0.5, pointing game) and their
    deletion / insertion AUC, on scikit-image's photos plus ``photos`` when it exists
    (:mod:`rtaudit.modelbuild.explain.evaluation`)."""
    from rtaudit.modelbuild.explain import evaluation as ev
    from rtaudit.engine.explain.cam import CamExplainer
    from rtaudit.engine.explain.classifier import OpenNSFW

    images = ev.photo_corpus(photos)
    labelled = ev.detector_labelled(images)
    served = OpenNSFW(prefer_gpu=False)
    copy = served.torch_copy()
    loc = Table("method", "box threshold", "images", "mean IoU", "IoU >= 0.5", "pointing", "per image (IoU, * = pointing hit)",
                title=f"Localization of open_nsfw {served.model.version} `nsfw` maps vs NudeNet 320n boxes "
                      f"({len(labelled)} of {len(images)} images have a box)")
    faith = Table("method", "images", "deletion AUC (lower is better)", "insertion AUC (higher is better)",
                  title="Deletion / insertion of P(nsfw), 20 steps (RISE; torchcam)")
    for method in ("gradcam++", "gradcam"):
        explainer = CamExplainer(copy, method)
        try:
            for threshold in (0.5, 0.15):
                r = ev.localization(explainer, labelled, threshold=threshold)
                loc.add_row(method, f"{threshold:.2f}", str(r.images), f"{r.mean_iou:.3f}", f"{r.share_iou_50:.3f}",
                            f"{r.pointing:.3f}", " ".join(f"{n}={v:.2f}{'*' if hit else ''}" for n, v, hit in r.per_image))
            f = ev.deletion_insertion(explainer, [rgb for _, rgb in images])
            faith.add_row(method, str(f.images), f"{f.deletion_auc:.4f}", f"{f.insertion_auc:.4f}")
        finally:
            explainer.close()
    base = ev.centre_baseline(labelled)  # the bar: a centred box and point, no map
    loc.add_row(base.method + " (no map)", "-", str(base.images), f"{base.mean_iou:.3f}", f"{base.share_iou_50:.3f}",
                f"{base.pointing:.3f}", " ".join(f"{n}={v:.2f}{'*' if hit else ''}" for n, v, hit in base.per_image))
    return [loc, faith]
