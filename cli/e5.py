"""``rtaudit text train-e5``: fit the multilingual-e5-small heads (:mod:`rtaudit.modelbuild.text.e5_train`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from rtaudit.cli.common import settings_or_exit
from rtaudit.cli.text import DEFAULT_DATA


def text_train_e5(
    data: Annotated[Optional[Path], typer.Option("--data", help="root of the per-language abuse sets (DIR/<source>/<file>; "
                                                  "default $RTAUDIT_MULTILINGUAL_DATA or ~/.cache/rtaudit/multilingual)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="output directory (default: engine/text/artifacts/multilingual_e5)")] = None,
    threads: Annotated[int, typer.Option(help="onnxruntime intra-op threads of the encoder (0: one per core)")] = 0,
    english_data: Annotated[Path, typer.Option("--english-data", help="root of the labelled English data (text/olid, "
                                               "text/davidson): the romanized-script routers' English negatives")]
    = DEFAULT_DATA,
    ngram_only: Annotated[bool, typer.Option("--ngram-only", help="refit only the romanized character n-gram abuse models "
                                             "(ngram_<lang>.npz: no encoder, no embedding; the e5 heads and routers stay)")]
    = False,
) -> None:
    """Embed a seeded sample of the per-language sets with multilingual-e5-small (cached under the cache directory)
    and fit one head per language plus the "any" head; write their .npz and manifest."""
    from rtaudit.modelbuild.text import e5_train
    from rtaudit.modelbuild.text import multilingual_data as MD
    from rtaudit.engine.text.e5 import E5Encoder
    from rtaudit.engine.text.cascade import STRONG_HEAD
    from rtaudit.engine.text.e5_heads import artifacts_dir

    root = data or MD.default_data_dir(settings_or_exit(None).multilingual_data)
    if ngram_only:
        _ngram_only(root, out or artifacts_dir())
        return
    gone = MD.missing(root)
    if gone:
        Console(stderr=True).print(f"no per-language data under {root}: {gone[0]} not found "
                                   "(docs/text-moderation.md, 'Other languages')", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    try:
        encoder = E5Encoder(intra_op_threads=threads, cache=settings_or_exit(None).cache)
    except ImportError as e:
        Console(stderr=True).print(f"no multilingual encoder: {e}", markup=False)
        raise typer.Exit(2) from None
    from rtaudit.modelbuild.text import romanized_data as romanized
    from rtaudit.modelbuild.text.romanized_train import train_ngram_heads, train_routers

    out = out or artifacts_dir()
    e5_train.train_all(root, out, encoder)
    if romanized.missing(root):
        Console(stderr=True).print(f"romanized heads skipped: {romanized.missing(root)[0]} not found", markup=False)
        manifest = json.loads((out / "manifest.json").read_text())
    else:
        e5_train.train_all(root, out, encoder, languages=romanized.ROMANIZED, fit_any=False)
        train_routers(root, english_data, out)
        manifest = train_ngram_heads(root, out)
    table = Table("head", "sha256", "C", "dev AUC", "threshold", "dev R", "dev ordinary FP", "dev abuse-set neg FP")
    for name, a in manifest["artifacts"].items():
        r = a["report"]
        if name.startswith(("route_", "ngram_")) or name == STRONG_HEAD:
            continue
        table.add_row(a["language"], a["sha256"][:16], str(r["C"]), f"{r['dev_auc']:.3f}", f"{r['threshold']:.3f}",
                      f"{r['dev_recall']:.3f}", "-" if r["dev_ordinary_fp"] is None else f"{r['dev_ordinary_fp']:.1%}",
                      "-" if r["dev_neg_fp"] is None else f"{r['dev_neg_fp']:.1%}")
    Console().print(table)


def _ngram_only(root: Path, out: Path) -> None:
    """``--ngram-only``: :func:`rtaudit.modelbuild.text.romanized_train.train_ngram_heads` and its table."""
    from rtaudit.engine.text.romanized import ngram_file
    from rtaudit.modelbuild.text import romanized_data as romanized
    from rtaudit.modelbuild.text.romanized_train import NGRAM_HEADS, train_ngram_heads

    gone = [p for lang in NGRAM_HEADS for p in romanized.missing(root, lang)]
    if gone:
        Console(stderr=True).print(f"romanized data not found: {gone[0]} (docs/text-moderation.md, 'Romanized scripts')",
                                   markup=False, soft_wrap=True)
        raise typer.Exit(2)
    manifest = train_ngram_heads(root, out)
    table = Table("n-gram model", "sha256", "dev AUC", "threshold", "dev R", "dev non-abusive FP", "dev benign FP",
                  title=manifest["version"])
    for lang in NGRAM_HEADS:
        a = manifest["artifacts"][ngram_file(lang)]
        r = a["report"]
        table.add_row(lang, a["sha256"][:16], f"{r['dev_auc']:.3f}", f"{r['threshold']:.3f}", f"{r['dev_recall']:.3f}",
                      f"{r['dev_neg_fp']:.1%}", "-" if r["dev_benign_fp"] is None else f"{r['dev_benign_fp']:.1%}")
    Console().print(table)


def text_train_cascade(
    data: Annotated[Path, typer.Option("--data", help="root of the labelled English data (text/davidson, text/olid, "
                                       "text/hatexplain)")] = DEFAULT_DATA,
    out: Annotated[Optional[Path], typer.Option(help="output directory, holding the e5 heads' manifest.json (default: "
                                                "engine/text/artifacts/multilingual_e5: replaces the shipped head)")] = None,
    threads: Annotated[int, typer.Option(help="onnxruntime intra-op threads of the encoder (0: one per core)")] = 0,
) -> None:
    """Fit the cascade's strong English head (e5 embeddings of the train splits of Davidson, OLID and HateXplain;
    :mod:`rtaudit.modelbuild.text.cascade_train`); write it and its manifest entry."""
    from rtaudit.engine.text.e5 import E5Encoder
    from rtaudit.engine.text.e5_heads import artifacts_dir
    from rtaudit.modelbuild.text import cascade_train
    from rtaudit.modelbuild.text import data as D

    settings = settings_or_exit(None)
    missing = [p for name in cascade_train.SETS for p in D.data_files(data)[name] if not p.is_file()]
    if missing:
        Console(stderr=True).print(f"English training data not found: {missing[0]} (pass --data DIR)", markup=False)
        raise typer.Exit(2)
    try:
        encoder = E5Encoder(intra_op_threads=threads, cache=settings.cache)
    except ImportError as e:
        Console(stderr=True).print(f"no multilingual encoder: {e}", markup=False)
        raise typer.Exit(2) from None
    encoder.use_cache()
    entry = cascade_train.train(data, out or artifacts_dir(), encoder)
    table = Table("category", "C", "CV AUC", "threshold", "train rows", "positives", title=f"cascade head {entry['sha256'][:16]}")
    for c, r in entry["report"].items():
        table.add_row(c, str(r["C"]), f"{r['cv_auc']:.3f}", f"{r['threshold']:.2f}", str(r["train_rows"]), str(r["positives"]))
    Console().print(table)
