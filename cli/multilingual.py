"""``rtaudit text train-multilingual`` and the per-language section of ``rtaudit eval``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from rtaudit.cli.common import MarkdownConsole, settings_or_exit


def text_train_multilingual(
    data: Annotated[Optional[Path], typer.Option("--data", help="root of the per-language abuse sets (DIR/<source>/<file>; "
                                                  "default $RTAUDIT_MULTILINGUAL_DATA or ~/.cache/rtaudit/multilingual)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="output directory (default: engine/text/artifacts/multilingual)")] = None,
    languages: Annotated[Optional[str], typer.Option(help="comma-separated languages to retrain (default: all)")] = None,
) -> None:
    """Train the per-language character n-gram models (es fr de pt it ru ar hi); write their .npz and manifest."""
    from rtaudit.engine.text import multilingual as ML
    from rtaudit.modelbuild.text import multilingual_data as MD
    from rtaudit.modelbuild.text.multilingual_train import train_all

    root = data or MD.default_data_dir(settings_or_exit(None).multilingual_data)
    langs = tuple(x.strip() for x in languages.split(",") if x.strip()) if languages else ML.LANGUAGES
    unknown = [x for x in langs if x not in ML.LANGUAGES]
    if unknown:
        Console(stderr=True).print(f"unknown language {unknown[0]!r}: one of {', '.join(ML.LANGUAGES)}", markup=False)
        raise typer.Exit(2)
    if all(MD.missing(root, x) for x in langs):
        Console(stderr=True).print(f"no per-language data under {root}: {MD.missing(root, langs[0])[0]} not found "
                                   "(docs/text-moderation.md, 'Other languages')", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    manifest = train_all(root, out, langs)
    table = Table("language", "artifact", "sha256", "bytes", "n-grams", "C", "dev P", "dev R", "dev macro-F1")
    for name, a in manifest["artifacts"].items():
        r = a["report"]
        table.add_row(a["language"], name, a["sha256"][:16], str(a["bytes"]), "-".join(map(str, r["ngrams"])), str(r["C"]),
                      f"{r['dev_precision']:.3f}", f"{r['dev_recall']:.3f}", f"{r['dev_macro_f1']:.3f}")
    Console().print(table)
    for lang, why in manifest["skipped"].items():
        Console().print(f"[yellow]{lang}: not retrained ({why}); the shipped model is kept[/yellow]")


def multilingual_section(console: "Console | MarkdownConsole", scorer, data: Path | None, quick: bool) -> None:
    """The per-language table of ``rtaudit eval``: held-out test split (P/R/F1 through the whole scorer)
    and the benign-sentence false-positive rate; one line instead when the data is missing."""
    from rtaudit.modelbuild.text import multilingual_data as MD
    from rtaudit.modelbuild.text import multilingual_train as MT

    root = data or MD.default_data_dir(settings_or_exit(None).multilingual_data)
    gone = MD.missing(root)
    if gone:
        console.print(f"[yellow]per-language table skipped: {gone[0]} not found (set ${MD.DATA_ENV}; "
                      f"docs/text-moderation.md, 'Other languages')[/yellow]", soft_wrap=True)
        return
    t = Table("language", "datasets", "test n", "pos", "routed to own model", "P", "R", "F1", "benign n", "benign FP", "UD test n", "UD FP",
              f"target R >= {MT.TARGET_RECALL:.2f}, FP <= {MT.TARGET_BENIGN_FP:.0%}",
              title="Other languages: held-out test split (score >= 0.5) and benign sentences")
    rows_of, memo = None, None
    semantic = getattr(scorer, "semantic", None)
    if semantic is not None:  # the e5 heads' seeded test sample (fixed: the seed alone picks it, not the cache)
        from rtaudit.modelbuild.text import e5_train

        memo = semantic.encoder.memo or semantic.encoder.use_cache()
        rows_of = lambda lang: e5_train.sample(root, lang)  # noqa: E731
        t.title = f"{t.title or ''} (seeded sample: at most {sum(e5_train.CAPS['test'].values())} test rows per language)"
    for r in MT.test_report(scorer, root, quick=quick, rows_of=rows_of):
        t.add_row(r.language, r.datasets, str(r.n), str(r.pos), f"{r.routed:.1%}", f"{r.precision:.3f}", f"{r.recall:.3f}",
                  f"{r.f1:.3f}", str(r.benign_n), f"{r.benign_fp:.1%}", str(r.ud_n), f"{r.ud_fp:.1%}", "[green]met[/green]" if r.met else "[red]not met[/red]")
    if memo is not None:
        memo.save()
    console.print(t)
    if semantic is not None:
        from rtaudit.modelbuild.text import e5_train

        c = Table("language", "test pos", "test ordinary", "n-gram R", "ordinary FP", "benign FP",
                  "n-gram @ dev FP R", "ordinary FP", "benign FP", "e5 R", "ordinary FP", "abuse-set neg FP", "benign FP",
                  title=f"Other languages, models alone: n-gram (shipped, and re-thresholded at <= "
                        f"{e5_train.ORDINARY_FP_MAX:.0%} dev ordinary FP) vs multilingual-e5-small heads (same rule)")
        for e in e5_train.compare_languages(root, semantic.encoder, semantic.heads):
            row = [e["lang"], str(e["pos"]), str(e["ordinary"])]
            for name in ("char", "char_fp", "e5"):
                m = e[name]
                row += [f"{m['recall']:.3f}", f"{m['ordinary_fp']:.1%}"] + ([f"{m['neg_fp']:.1%}"] if name == "e5" else []) \
                    + [f"{m['benign_fp']:.0%}"]
            c.add_row(*row)
        console.print(c)
