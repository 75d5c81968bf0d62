"""The tabular benchmark's report: the tables tabular.py prints, and the fit tables peers.py reuses."""

from __future__ import annotations

import _common as C
from tabular_approaches import (
    BACKEND_SHORT,
    CEILING_APPROACHES,
    FIT_APPROACHES,
    FIT_SPES,
    FLOOR_APPROACHES,
    FLOOR_TARGETS,
    ITER_APPROACHES,
    SHUFFLE_CPU_PAIRS,
    TARGETS,
)
from tabular_workers import PROCESS, find


def summarize(iteration: list[dict], fits: list[dict], fit_memory: list[dict]) -> tuple[str, dict]:
    """tabular.py's report: iteration, the decode floor, fit, memory, and the ratios against their targets."""
    lines: list[str] = []
    ratios: dict[str, float] = {}
    sizes = sorted({r["size"] for r in iteration}, key=lambda s: int(s.rstrip("x"))) or ["1x"]
    # ------------------------------------------------------------- iteration
    limit = find(iteration, size="1x", approach="scanner")
    rows = []
    for approach, label in ITER_APPROACHES.items():
        if not any(r["approach"] == approach for r in iteration):
            continue
        row = [label]
        for i, size in enumerate(sizes):
            r = find(iteration, size=size, approach=approach)
            row += [C.rate(r and r["rows_per_s"])]
            if i == 0:
                row += [C.rate(r and r["rows_per_s_best"]), f"{r['cpu_s_per_mrow']:.3f}" if r else "-"]
            row += [C.mib(r and r["peak_rss"]), C.mib(r and (r["peak_rss"] - r["base_rss"]))]
        one = find(iteration, size="1x", approach=approach)
        row.append(f"{one['rows_per_s'] / limit['rows_per_s']:.2f}" if one and limit else "-")
        big = find(iteration, size=sizes[-1], approach=approach) if len(sizes) > 1 else None
        row.append(f"{(big['peak_rss'] / one['peak_rss'] - 1) * 100:+.1f}%" if big and one else "-")
        rows.append(row)
    headers = ["iteration (batches of 1024)"]
    for i, size in enumerate(sizes):
        headers += [f"rows/s {size}"]
        if i == 0:
            headers += [f"best {size}", "CPU s/Mrow"]
        headers += [f"peakRSS {size}", f"Δ{size}"]
    headers += ["vs limit", f"RSS 1x→{sizes[-1]}"]
    lines.append(C.table(headers, rows))
    lines.append(
        "  rows/s = median over whole epochs (>= 5, >= --min-seconds), best = fastest epoch; "
        "CPU s/Mrow = process CPU time\n"
        "  per million rows (all threads); peakRSS in MiB; ΔN = peak RSS minus RSS after imports and setup\n"
        "  (the pipeline's own memory); vs limit = median rows/s / the scanner's median rows/s at 1x."
    )
    sums = {r["label_sum"] for r in iteration if r.get("size") == "1x" and "label_sum" in r}
    if sums:
        spread = max(sums) - min(sums)
        lines.append(
            f"  checksum: sum(y) over one epoch agrees across approaches to {spread:.2e} (rows: "
            f"{sorted({r['rows'] for r in iteration if r.get('size') == '1x' and 'rows' in r})})"
        )
    for approach in ("streamfeed", "streamfeed_shuffled"):
        one = find(iteration, size="1x", approach=approach)
        if one and limit:
            ratios[f"iteration/{approach}_vs_scanner"] = one["rows_per_s"] / limit["rows_per_s"]
        big = find(iteration, size=sizes[-1], approach=approach) if len(sizes) > 1 else None
        if one and big:
            ratios[f"rss_growth/{approach}"] = big["peak_rss"] / one["peak_rss"] - 1
            ratios[f"rss_delta_growth/{approach}"] = (big["peak_rss"] - big["base_rss"]) / max(
                1, one["peak_rss"] - one["base_rss"]
            ) - 1
        if one and "layout" in one:
            lines.append(
                f"  {approach}: layout estimate {C.mib(one['layout']['estimated_bytes'])} MiB "
                f"(window {one['layout']['window']}, read-ahead {one['layout']['read_ahead']}, "
                f"prefetch {one['layout']['prefetch']}); "
                f"measured Δ {C.mib(one['peak_rss'] - one['base_rss'])} MiB"
            )
    for name, (plain, shuffled) in SHUFFLE_CPU_PAIRS.items():
        base, other = (find(iteration, size="1x", approach=a) for a in (plain, shuffled))
        if base and other:
            ratios[f"shuffle_cpu/{name}"] = other["cpu_s_per_mrow"] / base["cpu_s_per_mrow"]
            lines.append(
                f"  shuffled / unshuffled CPU per row, {name}: {ratios[f'shuffle_cpu/{name}']:.2f} "
                f"({other['cpu_s_per_mrow']:.3f} / {base['cpu_s_per_mrow']:.3f}; target <= {TARGETS['shuffle_cpu']})"
            )
    floor_lines, floor_ratios = floor_summary(iteration)
    lines += floor_lines
    ratios.update(floor_ratios)
    if fits:
        lines.append("")
        fit_lines, fit_ratios = fit_summary(fits, FIT_APPROACHES)
        lines += fit_lines
        ratios.update({k: v for k, v in fit_ratios.items() if "/streamfeed" in k})
    if fit_memory:
        lines.append("")
        sizes_f = sorted({r["size"] for r in fit_memory}, key=lambda s: int(s.rstrip("x")))
        rows = []
        for approach, label in FIT_APPROACHES.items():
            cells = [find(fit_memory, approach=approach, size=s) for s in sizes_f]
            if not any(cells):
                continue
            row = [label] + [C.mib(c and c["peak_rss"]) for c in cells]
            row.append(
                f"{(cells[-1]['peak_rss'] / cells[0]['peak_rss'] - 1) * 100:+.1f}%" if cells[0] and cells[-1] else "-"
            )
            rows.append(row)
            if cells[0] and cells[-1] and approach.startswith("streamfeed"):
                ratios[f"rss_growth_fit/{approach}"] = cells[-1]["peak_rss"] / cells[0]["peak_rss"] - 1
        backend = fit_memory[0]["backend"]
        lines.append(C.table([f"fit peak RSS MiB ({backend}, spe=32)"] + sizes_f + ["growth"], rows))
    # ---------------------------------------------------------------- ratios
    lines.append("")
    rows = []
    for key, value in ratios.items():
        kind = key.split("/")[0]
        if kind.startswith("rss"):
            target, ok = f"< {TARGETS['rss_growth']:.0%}", value < TARGETS["rss_growth"]
            shown = f"{value * 100:+.1f}%"
        elif kind == "shuffle_cpu":
            target, ok, shown = f"<= {TARGETS[kind]:.2f}", value <= TARGETS[kind], f"{value:.2f}"
        elif kind == "floor":
            approach = key.split("/")[1].removesuffix("_vs_floor")
            limit = FLOOR_TARGETS[approach]
            target, shown = (f"<= {limit:.2f}" if limit else "-"), f"{value:.2f}"
            ok = value <= limit if limit else None
        else:
            target = f">= {TARGETS[kind]:.2f}"
            ok = value >= TARGETS[kind]
            shown = f"{value:.2f}"
        rows.append([key, shown, target, "" if ok is None else "ok" if ok else "MISS"])
    lines.append(C.table(["ratio", "value", "target", ""], rows))
    return "\n".join(lines), ratios


def floor_summary(iteration: list[dict]) -> tuple[list[str], dict[str, float]]:
    """Issue 27's table: CPU s per M rows of each streamfeed path against the decode floor measured in the same run.

    The floor is the faster (lower median CPU) of the two floor variants;
    each ratio is median / median, with best / best beside it.
    """
    floors = [r for r in (find(iteration, size="1x", approach=a) for a in FLOOR_APPROACHES) if r]
    if not floors:
        return [], {}
    floor = min(floors, key=lambda r: r["cpu_s_per_mrow"])
    rows, ratios = [], {}
    for approach in FLOOR_APPROACHES + tuple(FLOOR_TARGETS):
        r = find(iteration, size="1x", approach=approach)
        if not r:
            continue
        median = r["cpu_s_per_mrow"] / floor["cpu_s_per_mrow"]
        best = r["cpu_s_per_mrow_best"] / floor["cpu_s_per_mrow_best"]
        limit = FLOOR_TARGETS.get(approach)
        verdict = "" if limit is None else ("ok" if median <= limit else "MISS")
        rows.append(
            [
                ITER_APPROACHES[approach],
                f"{r['cpu_s_per_mrow_best']:.3f}",
                f"{r['cpu_s_per_mrow']:.3f}",
                f"{best:.2f}",
                f"{median:.2f}",
                "-" if limit is None else f"<= {limit:.2f}",
                verdict,
            ]
        )
        if approach in FLOOR_TARGETS:
            ratios[f"floor/{approach}_vs_floor"] = median
    headers = ["CPU per row vs the decode floor", "best s/Mrow", "median s/Mrow", "x floor best", "x floor median"]
    lines = ["", C.table(headers + ["target", ""], rows)]
    lines.append(
        f"  the floor = {ITER_APPROACHES[floor['approach']]} (the faster of the two variants, by median CPU);\n"
        "  CPU = time.process_time() over whole epochs (all threads, Arrow's pool included), best and median of\n"
        f"  {min(r['epochs'] for r in floors)}+ epochs; x floor = this CPU / the floor's "
        "(best / best, median / median); targets on the median."
    )
    lines += ["", iteration_profile(iteration, FLOOR_APPROACHES + tuple(FLOOR_TARGETS))]
    return lines, ratios


def iteration_profile(iteration: list[dict], approaches) -> str:
    """CPU s per M rows by thread group of each approach (iteration, no model), from untimed profile epochs."""
    found = [find(iteration, size="1x", approach=a) for a in approaches]
    found = [r for r in found if r and "thread_cpu_s_per_mrow" in r]
    groups = list(dict.fromkeys(g for r in found for g in sorted(r["thread_cpu_s_per_mrow"]) if g != PROCESS))
    rows = [
        [ITER_APPROACHES[r["approach"]], f"{r['thread_cpu_s_per_mrow'].get(PROCESS, 0.0):.3f}"]
        + [f"{r['thread_cpu_s_per_mrow'].get(g, 0.0):.3f}" for g in groups]
        for r in found
    ]
    text = C.table(["iteration profile: CPU s per M rows by thread", "process"] + groups, rows)
    return text + (
        "\n  over 2 more epochs after the timed ones (so that those do not pay for sampling /proc every 16 batches);"
        "\n  10 ms ticks; the groups sum to less than the process where threads ended between samples."
    )


def fit_summary(fits: list[dict], labels: dict[str, str]) -> tuple[list[str], dict[str, float]]:
    """The fit tables (rows/s, x the model's ceiling, CPU, RSS, profile) and every approach's ratio to the ceiling.

    ``labels`` names the approaches, in the order the rows show; the ceiling
    per backend and steps_per_execution is the faster of ``CEILING_APPROACHES``.
    """
    lines: list[str] = []
    ratios: dict[str, float] = {}
    backends = list(dict.fromkeys(r["backend"] for r in fits))
    columns = [
        (b, spe) for b in backends for spe in FIT_SPES if any(r["backend"] == b and r["spe"] == spe for r in fits)
    ]
    names = [f"{BACKEND_SHORT.get(b, b)} spe={spe}" for b, spe in columns]
    ceilings = {}
    for backend, spe in columns:
        found = [find(fits, backend=backend, approach=a, spe=spe) for a in CEILING_APPROACHES]
        found = [r for r in found if r]
        ceilings[backend, spe] = max(found, key=lambda r: r["rows_per_s"]) if found else None
    present = [a for a in labels if any(r["approach"] == a for r in fits)]
    cells = {(a, col): find(fits, backend=col[0], approach=a, spe=col[1]) for a in present for col in columns}

    def grid(title, show):
        rows = [[labels[a]] + [show(cells[a, col], col) for col in columns] for a in present]
        return C.table([title] + names, rows)

    def ratio(r, col):
        ceiling = ceilings[col]
        return f"{r['rows_per_s'] / ceiling['rows_per_s']:.2f}" if r and ceiling else "-"

    lines.append(grid("model.fit rows/s", lambda r, col: C.rate(r and r["rows_per_s"])))
    lines.append(
        "  ceiling = "
        + "; ".join(
            f"{name}: {labels[c['approach']]}" if c else f"{name}: -" for name, c in zip(names, ceilings.values())
        )
    )
    lines.append("")
    lines.append(grid("fit / the model's ceiling", ratio))
    lines.append("")
    lines.append(grid("fit CPU s per M rows", lambda r, col: f"{r['cpu_s_per_mrow']:.2f}" if r else "-"))
    lines.append("")
    lines.append(grid("fit peak RSS MiB", lambda r, col: C.mib(r and r["peak_rss"])))
    lines.append(
        "  rows/s = best of the epochs after the first of fit(epochs=3), after a 64-step warm-up fit;\n"
        "  ceiling = the faster of in-memory NumPy and a PyDataset serving in-memory slices, on the same\n"
        "  backend and steps_per_execution; CPU s per M rows = process CPU time of that epoch (model +\n"
        "  input pipeline, all threads; on 2 shared cores the pipeline's CPU is taken from the model)."
    )
    lines.append("")
    lines.append(profile_table(fits, columns, names, present, labels))
    for a in present:
        for col in columns:
            r, ceiling = cells[a, col], ceilings[col]
            if r and ceiling:
                ratios[f"fit/{col[0]}/spe{col[1]}/{a}_vs_ceiling"] = r["rows_per_s"] / ceiling["rows_per_s"]
    return lines, ratios


def profile_table(fits, columns, names, present, labels) -> str:
    """Where each fit cell's CPU went, by thread group (the same epoch as its rows/s): the profile of a miss."""
    groups = [g for _, g in C.THREAD_GROUPS] + [C.NATIVE_GROUP, "other Python threads"]
    found = {g for r in fits for g in r.get("thread_cpu_s_per_mrow", {})}
    shown = [g for g in dict.fromkeys(groups) if g in found]
    rows = []
    for col, name in zip(columns, names):
        for a in present:
            r = find(fits, backend=col[0], approach=a, spe=col[1])
            if not r or "thread_cpu_s_per_mrow" not in r:
                continue
            wait = r.get("input_wait_share")
            row = [f"{name} {labels[a]}", f"{r['cores_busy']:.2f}", "-" if wait is None else f"{wait:.1%}"]
            rows.append(row + [f"{r['thread_cpu_s_per_mrow'].get(g, 0.0):.3f}" for g in shown])
    text = C.table(["fit profile: CPU s per M rows by thread", "cores busy", "model waits"] + shown, rows)
    return text + (
        "\n  cores busy = the epoch's process CPU / its wall time (2 = both cores); model waits = the share of the"
        "\n  epoch the model's thread (TF: TensorFlow's pull of a block) waited for streamfeed's next batch."
    )
