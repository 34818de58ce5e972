"""Reading a bench run: the ratios the issue sets as targets, rich tables, ``bench.json``
and a PNG plot (matplotlib, Agg backend: no display needed); the overhead bench's table
and ``overhead.json``."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from rtaudit.tools.bench.overhead import Hop, OverheadRun, TargetOverhead
from rtaudit.tools.bench.runner import BenchRun, TargetResult, profile_summary
from rtaudit.tools.bench.stats import (
    Ratio, StepResult, compare_peer, cpu_ms_per_item, find_knee, format_hist, peak_throughput, safe_ratio, saturated,
    side_by_side, throughput_within_p99,
)

#: the issue's targets.
KNEE_VS_LIMIT = 0.9
NAIVE_SPEEDUP = 3.0
TEXT_P99_AT_70_MS = 150.0
#: against each peer (issue 14): throughput at the peer's knee P99 over the peer's knee, and P99 at 70 % over the peer's.
PEER_SPEEDUP = 1.2
PEER_P99_AT_70 = 1.0


def ratios(t: TargetResult) -> list[Ratio]:
    """The issue's targets for one stage: knee / limit, throughput at the naive consumer's P99
    over its throughput, P99 at 70 % of capacity (text), high-lane P99 against its SLO."""
    out: list[Ratio] = []
    knee = find_knee(t.worker, t.slo_ms)
    if t.limit is not None and t.profile is None:
        lim, knee_rate = t.limit, (knee.achieved_per_s if knee else None)
        extra = ""
        if lim.every_core is not None and lim.best_size in lim.every_core[1]:
            every_rate = lim.every_core[1][lim.best_size]
            extra = (f"; every core ({lim.every_core[0]} threads): {_rate(every_rate)}/s, "
                     f"knee / that {_fmt_ratio(safe_ratio(knee_rate, every_rate))}")
        if knee is not None and not saturated(t.worker, t.slo_ms):
            extra += "; the worker never saturated (run ended first): the knee is a lower bound"
        out.append(Ratio(
            t.name, "knee throughput / limit", safe_ratio(knee_rate, lim.best_per_s),
            KNEE_VS_LIMIT, "at_least",
            f"{_rate(knee_rate) if knee_rate else '-'}/s vs {_rate(lim.best_per_s)}/s at batch {lim.best_size}, "
            f"{lim.threads} inference thread(s) as the worker"
            + (f" ({_rate(lim.per_size[t.max_batch])}/s at the worker's max batch {t.max_batch})"
               if t.max_batch in lim.per_size and t.max_batch != lim.best_size else "") + extra,
        ))
        fit = lim.best_within(t.slo_ms)
        if fit is not None and fit != lim.best_size:
            out.append(Ratio(
                t.name, "knee throughput / limit within the SLO", safe_ratio(knee_rate, lim.per_size[fit]),
                KNEE_VS_LIMIT, "at_least",
                f"{_rate(lim.per_size[fit])}/s at batch {fit}, the best size whose batch ({lim.batch_ms(fit):.0f} ms) "
                f"fits twice in the {t.slo_ms:.0f} ms SLO; batch {lim.best_size} takes {lim.batch_ms(lim.best_size):.0f} ms",
            ))
    if t.naive:
        nk = find_knee(t.naive, t.slo_ms)
        at = throughput_within_p99(t.worker, nk.p99_ms) if nk else None
        out.append(Ratio(
            t.name, "throughput at naive P99 / naive", safe_ratio(at.achieved_per_s if at else None, nk.achieved_per_s if nk else None),
            NAIVE_SPEEDUP, "at_least",
            (f"naive {_rate(nk.achieved_per_s)}/s at P99 {nk.p99_ms:.0f} ms; worker "
             + (f"{_rate(at.achieved_per_s)}/s at P99 {at.p99_ms:.0f} ms" if at else "never that fast")
             + (f"; the model's own batching gain, limit / batch-of-1 rate, is {t.limit.best_per_s / t.limit.single_per_s:.1f}x"
                " (the most batching can add where inference dominates the naive consumer's time)" if t.limit is not None else ""))
            if nk else "naive never kept up",
        ))
    if t.name.startswith("text") and t.at_70 is not None:
        known = saturated(t.worker, t.slo_ms)  # else 70 % of a lower bound says nothing about capacity
        out.append(Ratio(
            t.name, "P99 at 70% of capacity, ms", t.at_70.p99_ms if known else None, TEXT_P99_AT_70_MS, "at_most",
            f"{_rate(t.at_70.offered_per_s)}/s offered, {t.at_70.sent} items"
            + ("" if known else f", P99 {t.at_70.p99_ms:.0f} ms at 70 % of a lower-bound knee: capacity not found"),
        ))
    out += peer_ratios(t)
    hi = next((s for s in t.lanes if "hi lane" in s.target), None)
    lo = next((s for s in t.lanes if "lo lane" in s.target), None)
    if hi is not None:
        out.append(Ratio(
            t.name, "hi-lane P99 / SLO (lo lane saturated)", hi.p99_ms / hi.slo_ms, 1.0, "at_most",
            f"hi P99 {hi.p99_ms:.0f} ms, SLO {hi.slo_ms:.0f} ms, {hi.slo_misses}/{hi.sent} missed"
            + (f"; lo offered {_rate(lo.offered_per_s)}/s, served {_rate(lo.achieved_per_s)}/s" if lo else ""),
        ))
    return out


def peer_ratios(t: TargetResult) -> list[Ratio]:
    """Issue 14's targets against each measured peer: the worker's throughput at the peer's knee
    P99 over the peer's knee throughput (≥ 1.2), and its P99 at 70 % of its own capacity over
    the peer's at 70 % of the peer's (≤ 1)."""
    out: list[Ratio] = []
    for peer in t.peers:
        if not peer.steps:
            continue
        c = compare_peer(peer.name, t.worker, peer.steps, t.slo_ms, t.at_70, peer.at_70)
        pk, at = c.peer_knee, c.at_peer_p99
        out.append(Ratio(
            t.name, f"throughput at {peer.name} knee P99 / {peer.name} knee", c.throughput_ratio, PEER_SPEEDUP, "at_least",
            (f"{peer.name} {_rate(pk.achieved_per_s)}/s at P99 {pk.p99_ms:.0f} ms; worker "
             + (f"{_rate(at.achieved_per_s)}/s at P99 {at.p99_ms:.0f} ms" if at else "never that fast")
             + ("" if c.worker_saturated else " (worker never saturated: a lower bound)"))
            if pk else f"{peer.name} never kept up",
        ))
        detail = (f"worker {_ms(c.worker_70.p99_ms)} ms at {_rate(c.worker_70.offered_per_s)}/s, " if c.worker_70 else "worker -, ") + (
            f"{peer.name} {_ms(c.peer_70.p99_ms)} ms at {_rate(c.peer_70.offered_per_s)}/s" if c.peer_70 else f"{peer.name} -")
        if not (c.worker_saturated and c.peer_saturated):
            detail += "; a capacity was not found (knee only a lower bound): not rated"
        out.append(Ratio(t.name, f"P99 at 70% / {peer.name}'s", c.p99_70_ratio, PEER_P99_AT_70, "at_most", detail))
    return out


def _per_size(per_size: dict[int, float]) -> str:
    """``1: 53.4  2: 78.6 …``: items/s by batch size."""
    return "  ".join(f"{b}: {_rate(v)}" for b, v in per_size.items())


def _fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _rate(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def _ms(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def header_table(run: BenchRun) -> Table:
    h, s = run.host, run.settings
    t = Table(show_header=False, title="rtaudit bench: what this was measured on")
    t.add_row("host", f"{h['usable_cores']} usable of {h['cores']} cores, {h['cpu']}, {h['memory_gib']} GiB; "
              f"load average at start {h['load_avg_at_start']}")
    t.add_row("software", f"Python {h['python']}; " + ", ".join(f"{k} {v}" for k, v in h["versions"].items()))
    t.add_row("broker", str(h["broker"]))
    t.add_row("batching", f"profile {s['profile']} ({profile_summary(str(s['profile']))}); overrides {s['overrides'] or 'none'}; "
              f"max batch per stage {s['stages']}; {s['partitions']} partitions per topic")
    models = sorted({tr.limit.model for tr in run.targets if tr.limit is not None})
    t.add_row("models", "; ".join(models) or "-")
    t.add_row("latency", "end-to-end from each item's scheduled send time (open loop) to the answer's arrival: "
              "partial on audit.scores (stages) or verdict on audit.verdicts (mixed)")
    return t


def limit_table(run: BenchRun) -> Table:
    t = Table("stage", "model", "threads", "items/s by batch size (process_batch, no Kafka)", "limit",
              title="the limit: the model stage alone (threads: onnxruntime intra-op, as the worker runs it)")
    seen = set()
    for tr in run.targets:
        if tr.limit is None or tr.limit.stage in seen:
            continue
        seen.add(tr.limit.stage)
        lim = tr.limit
        t.add_row(lim.stage, lim.model, str(lim.threads), _per_size(lim.per_size),
                  f"{_rate(lim.best_per_s)}/s @ {lim.best_size}")
        if lim.every_core is not None:
            threads, per_size = lim.every_core
            best = max(per_size, key=per_size.__getitem__)
            t.add_row(f"{lim.stage} (every core, reference)", "", str(threads),
                      _per_size(per_size), f"{_rate(per_size[best])}/s @ {best}")
    return t


def steps_table(t: TargetResult) -> Table:
    """One row per step; the knee of each series is marked."""
    table = Table(
        "series", "offered/s", "achieved/s", "sent", "ok", "P50 ms", "P95 ms", "P99 ms", "P50 to batch ms", "SLO miss",
        "batch mean", "batches by size (le:n)", "CPU % of a core", "",
        title=escape(f"{t.name}: stepped load (SLO {t.slo_ms:.0f} ms)" + (f" — {'; '.join(t.notes)}" if t.notes else "")),
    )
    peers = [p.steps for p in t.peers]
    knees = {id(find_knee(series, t.slo_ms)): saturated(series, t.slo_ms) for series in (t.worker, t.naive, *peers) if series}
    extra = [s for p in t.peers for s in [*p.steps, *([p.at_70] if p.at_70 else [])]]
    for s in [*t.worker, *([t.at_70] if t.at_70 else []), *t.lanes, *t.naive, *extra]:
        mark = "" if id(s) not in knees else "◀ knee" if knees[id(s)] else "◀ knee ≥ (never saturated)"
        if s.send_lag_ms > 100:
            mark += f" gen late {s.send_lag_ms:.0f} ms"
        table.add_row(
            escape(s.target), _rate(s.offered_per_s), _rate(s.achieved_per_s), str(s.sent), str(s.ok),
            _ms(s.p50_ms), _ms(s.p95_ms), _ms(s.p99_ms),
            " ".join(f"{k} {_ms(v)}" if len(s.queue_p50_ms) > 1 else _ms(v) for k, v in s.queue_p50_ms.items()),
            f"{s.slo_misses}" + (f" ({s.unanswered} lost)" if s.unanswered else ""),
            " ".join(f"{k} {v:.1f}" for k, v in s.batch_mean.items()),
            "; ".join(f"{k} {format_hist(h)}" if len(s.batch_hist) > 1 else format_hist(h) for k, h in s.batch_hist.items()),
            " ".join(f"{k} {v:.0f}" for k, v in s.cpu_pct.items()),
            mark,
        )
    return table


def _series(t: TargetResult) -> dict[str, tuple[list[StepResult], StepResult | None, str]]:
    """``name → (steps, 70 % step, CPU process name)`` of the worker, the naive consumer and each peer."""
    out = {"worker": (t.worker, t.at_70, t.name.split(" ")[0])}
    if t.naive:
        out["naive"] = (t.naive, None, "naive")
    for p in t.peers:
        out[p.name] = (p.steps, p.at_70, p.name)
    return out


def peers_table(t: TargetResult) -> Table | None:
    """The worker and its peers side by side: knee, P99 there, P50/P99 at 70 % of each one's
    own capacity, peak throughput, CPU ms per item at the knee (own processes; the broker
    apart), mean batch at the knee. A skipped peer gets a row saying why."""
    if not t.peers:
        return None
    table = Table("series", "knee items/s", "P50 / P99 at knee ms", "P50 / P99 at 70% ms", "peak items/s",
                  "CPU ms/item at knee (own)", "broker CPU ms/item", "batch mean at knee", "start s", "load avg at start", "note",
                  title=escape(f"{t.name}: the worker and its peers (same load, SLO {t.slo_ms:.0f} ms, same broker, this run)"))
    starts = {p.name: p.start_s for p in t.peers}
    loads = {"worker": t.load_at_start, **{p.name: p.load_at_start for p in t.peers}}
    for name, (steps, at_70, proc) in _series(t).items():
        knee = find_knee(steps, t.slo_ms)
        lower = knee is not None and not saturated(steps, t.slo_ms)
        cpu = cpu_ms_per_item(knee, [proc]) if knee else None
        broker = cpu_ms_per_item(knee, ["broker"]) if knee else None
        table.add_row(
            name, (_rate(knee.achieved_per_s) + (" ≥" if lower else "")) if knee else "-",
            f"{_ms(knee.p50_ms)} / {_ms(knee.p99_ms)}" if knee else "-",
            f"{_ms(at_70.p50_ms)} / {_ms(at_70.p99_ms)}" if at_70 else "-", _rate(peak_throughput(steps)) if steps else "-",
            f"{cpu:.1f}" if cpu is not None else "-", f"{broker:.1f}" if broker is not None else "-",
            " ".join(f"{v:.1f}" for v in knee.batch_mean.values()) if knee else "-",
            f"{starts[name]:.0f}" if starts.get(name) is not None else "",
            f"{loads[name]:.1f}" if loads.get(name) is not None else "", "",
        )
    for p in t.peers:
        if p.note:
            table.add_row(p.name, *["-"] * 9, escape(p.note))
    return table


def side_by_side_table(t: TargetResult) -> Table | None:
    """One row per offered rate, one column per series: achieved/s and P50/P99 ms at that step."""
    if not t.peers:
        return None
    series = {name: steps for name, (steps, _, _) in _series(t).items() if steps and name != "naive"}
    table = Table("offered/s", *[f"{n}: achieved/s, P50/P99 ms" for n in series],
                  title=escape(f"{t.name}: each step side by side (✗ = did not keep up)"))
    for rate, row in side_by_side(series):
        cells = []
        for name in series:
            s = row.get(name)
            cells.append("" if s is None else f"{_rate(s.achieved_per_s)}, {_ms(s.p50_ms)}/{_ms(s.p99_ms)}"
                         + ("" if s.keeps_up(t.slo_ms) else " ✗"))
        table.add_row(_rate(rate), *cells)
    return table


def ratio_table(run: BenchRun) -> Table:
    t = Table("stage", "ratio", "measured", "target", "met", "detail", title="targets, as measured in this run")
    for tr in run.targets:
        if tr.profile is not None:
            continue
        for r in ratios(tr):
            met = {True: "[green]yes[/green]", False: "[red]no[/red]", None: "n/a"}[r.met]
            value = "-" if r.value is None else f"{r.value:.2f}" if r.value < 10 else f"{r.value:.0f}"
            t.add_row(escape(r.stage), r.name, value, ("≥ " if r.direction == "at_least" else "≤ ") + f"{r.target:g}", met, escape(r.detail))
    return t


def profile_table(run: BenchRun) -> Table | None:
    rows = [tr for tr in run.targets if tr.profile is not None]
    if not rows:
        return None
    t = Table("profile", "settings", "knee items/s", "P99 at knee ms", "P99 at 70% ms", "peak items/s", "knee / limit",
              title="batching profiles (text stage): pick a point on the curve")
    for tr in rows:
        knee = find_knee(tr.worker, tr.slo_ms)
        ratio = safe_ratio(knee.achieved_per_s if knee else None, tr.limit.best_per_s if tr.limit else None)
        t.add_row(
            tr.profile or "", profile_summary(tr.profile or ""), _rate(knee.achieved_per_s) if knee else "-", _ms(knee.p99_ms) if knee else "-",
            _ms(tr.at_70.p99_ms) if tr.at_70 else "-", _rate(peak_throughput(tr.worker)),
            f"{ratio:.2f}" if ratio is not None else "-",
        )
    return t


def tables(run: BenchRun) -> list[Table]:
    out = [header_table(run), limit_table(run)]
    out += [steps_table(t) for t in run.targets if t.same_as is None]
    for t in run.targets:
        out += [x for x in (side_by_side_table(t), peers_table(t)) if x is not None]
    prof = profile_table(run)
    if prof is not None:
        out.append(prof)
    out.append(ratio_table(run))
    return out


def write_json(run: BenchRun, path: Path) -> Path:
    """Everything measured, for tooling (``bench.json``)."""
    def target(t: TargetResult) -> dict[str, object]:
        d = asdict(t)
        if t.limit is not None:
            d["limit"]["best_per_s"] = t.limit.best_per_s
        d["ratios"] = [asdict(r) | {"met": r.met} for r in ratios(t)]
        return d

    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"host": run.host, "settings": run.settings, "started_at": run.started_at, "wall_s": run.wall_s,
               "interrupted": run.interrupted,
               "targets": [target(t) for t in run.targets]}
    path.write_text(json.dumps(payload, indent=1, default=str))
    return path


#: line style of each peer's series in the plot.
PEER_STYLES: dict[str, object] = {"faust": "-.", "ray": (0, (5, 1, 1, 1, 1, 1))}


def plot(run: BenchRun, path: Path) -> Path:
    """Two panels, log-log: achieved vs offered (with each stage's limit) and P99 vs offered
    (with each SLO). Solid = worker, dashed = naive consumer, dotted = profiles, dash-dot =
    Faust peer, dash-dot-dot = Ray peer; ★ = knee."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_l) = plt.subplots(1, 2, figsize=(13, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, tr in enumerate(run.targets):
        color = colors[n % len(colors)]
        series = [("worker" if tr.profile is None else tr.profile, tr.worker, ":" if tr.profile else "-")]
        if tr.naive:
            series.append(("naive", tr.naive, "--"))
        series += [(p.name, p.steps, PEER_STYLES.get(p.name, "-.")) for p in tr.peers]
        for kind, steps, style in series:
            if not steps:
                continue
            x = [s.offered_per_s for s in steps]
            label = f"{tr.name} {kind}" if tr.profile is None else tr.name
            ax_t.plot(x, [s.achieved_per_s for s in steps], linestyle=style, marker="o", ms=3, color=color, label=label)
            ax_l.plot(x, [s.p99_ms for s in steps], linestyle=style, marker="o", ms=3, color=color, label=label)
            knee = find_knee(steps, tr.slo_ms)
            if knee is not None:
                ax_t.plot([knee.offered_per_s], [knee.achieved_per_s], "*", ms=12, color=color)
                ax_l.plot([knee.offered_per_s], [knee.p99_ms], "*", ms=12, color=color)
        if tr.limit is not None and tr.profile is None:
            ax_t.axhline(tr.limit.best_per_s, color=color, lw=0.8, alpha=0.6)
        if tr.profile is None:
            ax_l.axhline(tr.slo_ms, color=color, lw=0.8, alpha=0.6)
    everything = [s.offered_per_s for tr in run.targets for s in tr.worker + tr.naive + [x for p in tr.peers for x in p.steps]]
    if everything:
        lo, hi = min(everything), max(everything)
        ax_t.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="-.", label="achieved = offered")
    ax_t.set(xscale="log", yscale="log", xlabel="offered items/s", ylabel="achieved items/s",
             title="throughput (horizontal lines: the model's batched limit)")
    ax_l.set(xscale="log", yscale="log", xlabel="offered items/s", ylabel="P99 end-to-end latency, ms",
             title="P99 latency (horizontal lines: SLO)")
    for ax in (ax_t, ax_l):
        ax.grid(True, which="both", alpha=0.3)
    if ax_t.get_legend_handles_labels()[0]:
        ax_t.legend(fontsize=7, loc="upper left")
    h = run.host
    fig.suptitle(f"rtaudit bench — {h['usable_cores']} cores ({h['cpu']}), load at start {h['load_avg_at_start']}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- the overhead bench

#: what one "request" of each overhead target is, and what it reads per request.
_UNITS = {"router": "requests", "text": "tasks", "fusion": "verdicts (2 records in)", "fleet": "verdicts"}


def _cpu(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _hop(h: Hop | None) -> str:
    return "-" if h is None or not h.answered else f"{_ms(h.p50_ms)} / {_ms(h.p99_ms)}" + (
        f" ({h.sent - h.answered} lost)" if h.answered < h.sent else "")


def overhead_table(run: OverheadRun) -> Table:
    """One row per target (and one per role inside the fleet): saturated rate against the raw
    client's rates on the same records, CPU per 1,000, hop latency at low load against the raw hop."""
    h = run.host
    t = Table(
        "target", "processes", "raw produce rec/s", "raw consume rec/s", "rate /s at saturation", "in rec/s ÷ raw consume",
        "CPU s / 1k (worker)", "worker busy", "broker CPU s / 1k", "hop P50 / P99 ms @ load", "raw hop P50 / P99 ms", "added P50 ms",
        title=(f"rtaudit bench --model {run.model}: the fleet's own cost (one process per role; {h['usable_cores']} usable cores, "
               f"{h['cpu']}, load average at start {h['load_avg_at_start']})"),
        caption=(f"rate: requests done per second, {run.options['records']:,} produced at once (first produce → last output); "
                 f"hop latency at {float(run.options['latency_load']):.0%} of that rate, due time → output read; raw: confluent-kafka "
                 "alone on the same records and broker; busy = CPU s / wall s of the window (1.0 = one core)"),
    )
    for r in run.targets:
        roles = list(r.roles)
        worker_cpu = sum(r.cpu_s.get(p, 0.0) for p in roles) if all(p in r.cpu_s for p in roles) else None
        busy = " ".join(f"{r.busy(p):.2f}" for p in roles if r.busy(p) is not None) or "-"
        added = (r.hop.p50_ms - r.raw_hop.p50_ms) if r.hop and r.raw_hop and r.hop.answered and r.raw_hop.answered else None
        rate = f"{_rate(r.per_s)} {_UNITS[r.target]}" if r.answered else "-"
        if r.answered and r.answered < r.requests:
            rate += f" ({r.answered:,}/{r.requests:,} in {r.seconds:.0f} s)"
        t.add_row(
            f"{r.target}" + (f"\n[dim]{'; '.join(r.notes)}[/dim]" if r.notes else ""),
            " + ".join(roles), _rate(r.raw.produce_per_s) if r.raw else "-", _rate(r.raw.consume_per_s) if r.raw else "-",
            rate, _fmt_ratio(r.of_raw_consume),
            _cpu(1000.0 * worker_cpu / r.answered if worker_cpu is not None and r.answered else None), busy,
            _cpu(r.cpu_per_1k("broker")), _hop(r.hop), _hop(r.raw_hop), "-" if added is None else _ms(added),
        )
        if len(roles) > 1:
            for p in roles:
                t.add_row(f"  {r.target}: {p}", p, "", "", "", "", _cpu(r.cpu_per_1k(p)),
                          "-" if r.busy(p) is None else f"{r.busy(p):.2f}", "", "", "", "")
    return t


def write_overhead_json(run: OverheadRun, path: Path) -> Path:
    """Everything the overhead bench measured (``overhead.json``), with the derived rates."""
    def target(r: TargetOverhead) -> dict[str, object]:
        return asdict(r) | {"per_s": r.per_s, "input_records_per_s": r.input_records_per_s, "of_raw_consume": r.of_raw_consume,
                            "cpu_s_per_1k": {p: r.cpu_per_1k(p) for p in r.cpu_s}}

    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"host": run.host, "model": run.model, "options": run.options, "wall_s": run.wall_s,
               "interrupted": run.interrupted, "targets": [target(r) for r in run.targets]}
    path.write_text(json.dumps(payload, indent=1, default=str))
    return path
