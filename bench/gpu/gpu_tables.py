"""gpu.md: the figures of bench/gpu/driver.py as the tables docs/performance.md takes them."""

from __future__ import annotations


def _si(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    for prefix, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.3g}{prefix}{unit}"
    return f"{x:.3g}{unit}"


def _g(x) -> str:
    """A number, or a [lo, hi] interval, to 4 significant digits (None: -)."""
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_g(v) for v in x) + "]"
    return "-" if x is None else f"{x:.4g}" if isinstance(x, float) else str(x)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def _header(env: dict) -> list[str]:
    peak = (f"{env['peak_part']} dense bf16 peak {_si(env['peak_flop_s'], 'FLOP/s')} ({env['peak_source']})"
            if env.get("peak_flop_s") else "no datasheet peak for this device: shares are of the measured matmul")
    matmul = _si(env["matmul_flop_s"], "FLOP/s")
    return [f"device: {env['device']} ({env['device_type']}), torch {env['torch']}, CUDA {env['cuda']}, "
            f"{env['cores']} cores", f"{peak}; measured {env['matmul_dtype']} matmul {matmul}", ""]


def _throughput(rows: list[dict]) -> list[str]:
    lines = ["| shape | runs at once | tokens/s (sum) | tokens/s per run | model FLOP/s | share of peak | "
             "GPU memory per run | warm-up s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        memory = "-" if r["memory_bytes_per_run"] is None else f"{r['memory_bytes_per_run'] / 2**20:.0f} MiB"
        label = r["shape"] + (" compiled" if r["compile"] else "") + (" stacked" if r.get("stacked") else "")
        lines.append(f"| {label} | {r['runs']} | {r['tokens_per_s']:,.0f} | "
                     f"{r['tokens_per_s_per_run']:,.0f} | {_si(r['flop_s'])} | {_pct(r.get('share_of_peak'))} | "
                     f"{memory} | {r['warmup_s']:.1f} |")
    return lines + [""]


def _sweep(s: dict) -> list[str]:
    lines = [f"runs finished {s.get('finished_runs', 0)} of {s.get('planned_runs', '?')} (runs_per_gpu "
             f"{s.get('runs_per_gpu', '-')}); tokenizing {s.get('tokenize_s', 0):.1f} s"]
    if "sweep" in s:
        c = s["sweep"]
        stopped = ", stopped at its limit" if c["timed_out"] else ""
        lines.append(f"sweep wall {c['wall_s']:.1f} s (exit {c['rc']}{stopped}); "
                     f"{_si(s.get('flops_done'))} of {_si(s.get('planned_flops'))} exact FLOPs; "
                     f"{_si(s.get('flop_s'), 'FLOP/s')} = {_pct(s.get('share_of_peak'))} of peak; "
                     f"{s.get('tokens_per_s', 0):,.0f} tokens/s; at this call's rate the sweep needs "
                     f"{_g(s.get('projected_wall_s'))} s ({_si(s.get('flops_trained'))} FLOPs trained in this call, "
                     f"runs in flight counted to their last log; {_si(s.get('flops_trained_before'))} before it)")
    if s.get("tokens_per_s_per_run_by_shape"):
        lines.append("each run's own rate, median by shape (tokens/s): " + ", ".join(
            f"{k} {v:,.0f}" for k, v in s["tokens_per_s_per_run_by_shape"].items()))
    if "fit" in s and "verdict" not in s:
        stopped = ", stopped at its limit" if s["fit"]["timed_out"] else ""
        lines.append(f"fit: no fit.json (exit {s['fit']['rc']}{stopped}, {s['fit']['wall_s']:.1f} s)")
    if "verdict" in s:
        lines.append(f"fit: `{s['verdict']}`, a = {_g(s['a'])} {_g(s['a_interval'])} (width "
                     f"{_g(s['a_interval_width'])}), tokens per parameter {_g(s['tokens_per_param'])} "
                     f"{_g(s['tokens_per_param_interval'])} at {_si(s['reference_compute'])}, residual RMS "
                     f"{_g(s['residual_rms'])}")
    return [f"- {line}" for line in lines] + [""]


def _validation(s: dict) -> list[str]:
    if "skipped" in s:
        return [f"- skipped: {s['skipped']}", ""]
    lines = [f"- at C = {_si(s['compute'])}: wall {s['command']['wall_s']:.1f} s, runs finished "
             f"{s.get('finished_runs', 0)}; the optimum holds: {s.get('optimum_holds')}", "",
             "| position | d_model | N | D | predicted | interval | observed | inside | context use |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in s.get("runs", []):
        lines.append(f"| {r['position']} | {r['d_model']} | {_si(r['n'])} | {_si(r['d'])} | {_g(r['predicted'])} | "
                     f"{_g(r['interval'])} | {_g(r['observed'])} | {r['inside']} | {_g(r['context_use'])} |")
    return lines + [""]


def write_report(figures: dict) -> str:
    """Markdown of every stage recorded so far."""
    env = figures.get("env")
    lines = ["# The GPU path measured (bench/gpu/run.sh)" + (" - CPU DRY RUN" if figures["dry_run"] else ""), ""]
    lines += _header(env) if env else []
    for name, s in figures["stages"].items():
        lines += [f"## {name}: {s.get('status', 'running')}, {s.get('wall_s', 0):.1f} s of {s.get('limit_s', 0):.0f}",
                  ""]
        if "error" in s:
            lines += ["```", s["error"].strip(), "```", ""]
        elif name == "tests":
            lines += [f"- pytest -m cuda: exit {s['pytest']['rc']}", ""]
        elif name in ("throughput", "compile", "stacked"):
            lines += _throughput(s.get("rows", []))
            fallbacks = sorted({op for r in s.get("rows", []) for op in r.get("vmap_fallbacks", [])})
            if fallbacks:
                lines += [f"- vmap ran these one run at a time (no batching rule): {', '.join(fallbacks)}", ""]
            if s.get("best_runs_per_gpu"):
                lines += [f"- best runs per GPU {s['best_runs_per_gpu']} (mean speed-up over one run by k: "
                          + ", ".join(f"{k}: {v:.2f}x" for k, v in s["mean_speedup_by_runs"].items()) + ")", ""]
        elif name == "validate":
            lines += _validation(s)
        else:
            lines += _sweep(s)
            if name == "study" and figures.get("study_estimate_s"):
                lines[-1:-1] = [f"- estimated beforehand from stage throughput's packed rate: "
                                f"{figures['study_estimate_s']:.0f} s"]
    if "wall_s" in figures:
        lines.append(f"whole call: {figures['wall_s']:.1f} s")
    return "\n".join(lines) + "\n"
