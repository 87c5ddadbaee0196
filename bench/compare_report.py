"""The outputs of bench/compare_torch.py: the markdown tables and the PNG
(GB/s against size for the gelu sweep; bars per memory-bound workload) from
the merged results (fusebox_bench's JSON with PyTorch's numbers under each
result's "torch" key). Matmul cases (those with "flops") are compute-bound:
they get a TFLOP/s table of their own instead of GB/s."""

import math
from pathlib import Path

SWEEP = "gelu_sweep"
# (source, side, label): the five columns of every table, in order.
VARIANTS = [
    ("torch", "eager", "torch eager"),
    ("torch", "builtin", "torch built-in"),
    ("torch", "compiled", "torch.compile"),
    ("fusebox", "eager", "fusebox eager"),
    ("fusebox", "compiled", "fusebox compiled"),
]
# The matmul table's columns: the five, and each side's GEMMs alone ("gemms").
MATMUL_VARIANTS = VARIANTS[:3] + [("torch", "gemms", "torch GEMMs alone")] + VARIANTS[3:] + [
    ("fusebox", "gemms", "fusebox GEMMs alone")]


def is_matmul(r):
    """A compute-bound case: fusebox_bench counts its FLOPs (0 or absent otherwise)."""
    return (r.get("flops") or 0) > 0


def side_of(r, source, side):
    s = r.get("torch", {}).get(side) if source == "torch" else r.get(side)
    return s if s and "median_ms" in s else None


def fmt_time(r, source, side):
    s = side_of(r, source, side)
    if s is None:
        return "—"
    if r["calls_per_trial"] > 1:
        return f"{1e3 * s['median_ms']:.1f} us"
    return f"{s['median_ms']:.4f}"


def fmt_gbps(r, source, side, ceiling):
    s = side_of(r, source, side)
    if s is None:
        return "—"
    return f"{s['gbps']:.0f} ({100 * s['gbps'] / ceiling:.0f}%)" if ceiling else f"{s['gbps']:.0f}"


def fmt_tflops(r, source, side):
    """median ms (TFLOP/s), TFLOP/s = flops / median for every side (fusebox's have no "tflops")."""
    s = side_of(r, source, side)
    if s is None or not s["median_ms"]:
        return "—"
    return f"{s['median_ms']:.4f} ({r['flops'] / (s['median_ms'] * 1e-3) / 1e12:.1f})"


def fmt_ratio(r, a, b):
    """Median time of side a over side b, each a (source, side) pair."""
    sa, sb = side_of(r, *a), side_of(r, *b)
    if sa is None or sb is None or not sa["median_ms"] or not sb["median_ms"]:
        return "—"
    return f"{sa['median_ms'] / sb['median_ms']:.3f}x"


def fmt_kernels(r, source, side):
    s = side_of(r, source, side)
    if s is None or "kernels" not in s:
        return "—"
    names = s["kernels"]
    shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
    return f"{s['kernels_per_call']}: {shown}".replace("|", "\\|")


def case_label(r):
    return f"{r['name']}" + (f" ({r['label']})" if r["label"] and r["name"] != SWEEP else "")


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_markdown(merged, path, png_name):
    fb, meta = merged, merged["torch_meta"]
    ceiling = fb.get("ceiling_gbps") or 0
    results = fb["results"]
    main = [r for r in results if r["name"] != SWEEP]
    sweep = [r for r in results if r["name"] == SWEEP]
    labels = [v[2] for v in VARIANTS]
    matmul = [r for r in main if is_matmul(r)]
    copy = fb.get("copy_ceiling", {})
    out = [f"# fusebox vs PyTorch: {fb['device_name']}, {meta['date']}", ""]
    out += [f"- machine: {fb['device_name']} ({meta['machine']}); PyTorch {meta['torch']}, Triton {meta['triton']}, "
            f"CUDA {meta['cuda']}; L2 {meta['l2_bytes'] / 2**20:.0f} MiB as PyTorch reads it",
            f"- fusebox_bench and PyTorch ran in the same call{' (--quick sizes)' if fb['quick'] else ''}; "
            f"fusebox_bench's notes: {'; '.join(fb['notes']) or 'none'}",
            f"- method: {fb['warmup']} warm-up calls, then {fb['trials']} trials each timed with CUDA events "
            + ("after zeroing 256 MB on the GPU (as triton.testing.do_bench: the L2 is evicted and the host's launch "
               "path is hidden; the call-overhead rows measure that)" if fb.get("flush", "zero") == "zero" else
               "after summing 256 MB on the GPU (FUSEBOX_BENCH_FLUSH=read, both sides: the L2 is evicted as by "
               "do_bench's zeroing, but no dirty lines are left for the timed kernels to write back)")
            + "; median. Inputs rotated over copies in fresh "
            f"buffers while one set is under {fb['rotation_factor']:g}x "
            f"{fb['cache_bytes'] / 2**20:.0f} MiB (both sides use the same count); tiny_gelu: batches of calls on "
            "the host clock, per call",
            f"- GB/s = minimal bytes (each input read once, the output written once) / median time; % of the "
            f"copy ceiling: {ceiling:.0f} GB/s (fusebox_bench, {copy.get('bytes', 0) / 2**20:.0f} MiB "
            f"cuMemcpyDtoD, read + write); PyTorch's copy_ of 1 GiB: {meta['torch_copy']['gbps']:.0f} GB/s",
            "- torch eager and torch.compile run the manual op-by-op definitions (bench/compare_torch.py, the twins "
            "of bench/workloads.cc); built-in: F.gelu(approximate='tanh'), torch.softmax, F.layer_norm, "
            "F.rms_norm, x.sum, torch._addmm_activation(use_gelu=True) (cuBLASLt's GELU_BIAS epilogue); "
            "torch.compile(dynamic=False) after torch._dynamo.reset() for each case",
            "- rows marked replay: fusebox compiled with CompileOptions{.replay = true} (after two traced calls with "
            "the same arguments, the recorded plan runs without tracing), torch.compile with mode=\"reduce-overhead\" "
            "(CUDA graphs)"]
    if floor := fb.get("launch_floor"):
        out += [f"- tiny_gelu's floor on this host: {floor['median_us']:.1f} us per call for one cuLaunchKernel (a "
                f"{floor['elements']}-float copy, {floor['calls_per_trial']} per trial, synchronized; fusebox_bench): "
                "a compiled call of one kernel costs that plus its host work, and host speed differs between "
                "machines far more than the GPU does"]
    if matmul:
        tf32 = meta.get("allow_tf32")
        out += ["- matmul workloads: TFLOP/s = flops (2 M N K per GEMM, summed) / median time; not in the GB/s "
                "table or plot. GEMMs alone: the workload's GEMMs only (x @ w; the MLP's F.linear without bias or "
                "gelu) on the same inputs, torch eager and fusebox compiled. TF32 "
                + ("on" if tf32 else "off") + " for float32 (torch.backends.cuda.matmul.allow_tf32 = "
                + ("True" if tf32 else "False") + ")"]
    if any(r["workload"] == "gpt2_forward" for r in matmul):
        out += ["- gpt2_forward: nanoGPT's GPT-2 forward with the loss (logits and cross entropy), fusebox's "
                "examples/gpt2 against the same model in PyTorch (bench/compare_gpt2.py; tanh gelu in both), "
                "shape [batch, seq]; FLOPs as nanoGPT's estimate_mfu counts a forward (the four Linears, q k^T and "
                "att v over the whole T x T square, the lm_head); checked against float64 (fusebox: the first "
                "positions of one sequence; PyTorch: all logits)"]
    out += [""]
    out += ["## Median time (ms; tiny_gelu: per call)", ""]
    rows = [[case_label(r), r["shape"], r["dtype"]] + [fmt_time(r, s, d) for s, d, _ in VARIANTS] for r in main]
    out += [table(["workload", "shape", "dtype"] + labels, rows), ""]
    out += ["## GB/s (% of the copy ceiling)", ""]
    rows = [[case_label(r), r["shape"], r["dtype"]] + [fmt_gbps(r, s, d, ceiling) for s, d, _ in VARIANTS]
            for r in main if r["calls_per_trial"] == 1 and not is_matmul(r)]
    out += [table(["workload", "shape", "dtype"] + labels, rows), ""]
    if matmul:
        out += ["## Matmul workloads (TFLOP/s; time over the GEMMs alone)", "",
                "Each side: median ms (TFLOP/s). The ratios are of median times.", ""]
        rows = [[case_label(r), r["shape"], r["dtype"]] + [fmt_tflops(r, s, d) for s, d, _ in MATMUL_VARIANTS] +
                [fmt_ratio(r, ("fusebox", "compiled"), ("fusebox", "gemms")),
                 fmt_ratio(r, ("fusebox", "compiled"), ("torch", "compiled"))] for r in matmul]
        out += [table(["workload", "shape", "dtype"] + [v[2] for v in MATMUL_VARIANTS] +
                      ["fusebox compiled / fusebox GEMMs alone", "fusebox compiled / torch.compile"], rows), ""]
    out += ["## Kernels per call (count: names; fusebox eager lists its ops, one kernel each)", ""]
    rows = [[case_label(r), r["shape"], r["dtype"]] + [fmt_kernels(r, s, d) for s, d, _ in VARIANTS] for r in main]
    out += [table(["workload", "shape", "dtype"] + labels, rows), ""]
    if sweep:
        out += [f"## {SWEEP}: manual_gelu float32, GB/s (% of ceiling) against size", ""]
        rows = [[r["numel"], f"{r['bytes'] / 1e6:.3g}", r["input_sets"]] +
                [fmt_gbps(r, s, d, ceiling) for s, d, _ in VARIANTS] for r in sweep]
        out += [table(["elements", "MB", "input sets"] + labels, rows), ""]
    ptx_rows = [[case_label(r), r["shape"], r["dtype"], "<br>".join(r["compiled"].get("ptx", []))]
                for r in main if r["compiled"].get("ptx")]
    if ptx_rows:
        out += ["## PTX of the fusebox compiled kernels (static counts from the PTX; registers, spills and "
                "shared memory from ptxas -v)", ""]
        out += [table(["workload", "shape", "dtype", "kernel (xN: identical kernels): summary"], ptx_rows), ""]
    out += ["## First calls and checks", ""]
    rows = []
    for r in results:
        t = r.get("torch", {})
        tc = t.get("compiled") or {}
        errs = " / ".join(num((t.get(d) or {}).get("rel_err"), ".2g") for d in ("eager", "builtin", "compiled")
                          + (("gemms",) if t.get("gemms") else ()))
        rows.append([case_label(r), r["shape"], r["dtype"], num(tc.get("cold_ms"), ".0f"),
                     num(r["compiled"]["cold_ms"], ".0f"), num(r["warm_start_ms"], ".2f"),
                     f"{num(r['rel_err_eager'], '.2g')} / {num(r['rel_err_compiled'], '.2g')}", errs,
                     t.get("error") or ("ok" if r["ok"] and merged_case_ok(r) else "FAILED")])
    out += [table(["workload", "shape", "dtype", "torch.compile first call ms", "fusebox compiled first call ms",
                   "fusebox warm start ms", "fusebox rel err eager / compiled",
                   "torch rel err eager / built-in / compile (/ GEMMs alone)", "checks"], rows), ""]
    out += latency_section(fb)
    if png_name:
        out += [f"![GB/s against size and per workload]({png_name})", ""]
    Path(path).write_text("\n".join(out))


def latency_section(fb):
    """Issue 6's compile rows: fusebox_bench's fresh-process cold compile and
    warm start per kernel (its "compile_latency" section) beside the first
    call of torch.compile on the same workload and shape."""
    lat = fb.get("compile_latency")
    if not lat:
        return []
    cold, warm = lat["cold"], lat["warm"]
    out = ["## Compile latency and warm start (fresh processes)", ""]
    out += ["fusebox_bench ran itself twice on a new, empty FUSEBOX_CACHE_DIR: cold (every kernel compiled) and "
            "warm (a second process; every kernel from the disk cache, no compiler run). Per kernel, the whole "
            "first call; NVRTC's share in brackets. torch.compile: its first call in this run (after "
            "torch._dynamo.reset(), one graph). Issue 6: cold <= 50 ms, warm <= 2 ms per kernel.", ""]
    if cold.get("first_nvrtc_ms"):
        out += [f"- first NVRTC program in a process (a trivial kernel, before the graphs): "
                f"{cold['first_nvrtc_ms']:.0f} ms; the same again {cold['trivial_nvrtc_ms']:.0f} ms", ""]
    rows = []
    for i, g in enumerate(cold.get("graphs", [])):
        w = warm["graphs"][i] if i < len(warm.get("graphs", [])) else None
        k = max(g["kernels"], 1)
        twin = [r for r in fb["results"] if r["workload"] == g["workload"] and r["shape"] == g["shape"]
                and r["dtype"] == "float32"]
        tc = ((twin[0].get("torch") or {}).get("compiled") or {}) if twin else {}
        rows.append([g["workload"], g["shape"], g["kernels"],
                     f"{num(g['first_call_ms'] / k, '.1f')} ({num(g['nvrtc_ms'] / k, '.1f')})",
                     num(w["first_call_ms"] / k, ".2f") if w else "—",
                     f"{g['compiles']} / {w['compiles'] if w else '—'}", num(tc.get("cold_ms"), ".0f")])
    out += [table(["graph", "shape", "kernels", "fusebox cold ms per kernel (NVRTC)", "fusebox warm start ms per kernel",
                   "compiler runs cold / warm", "torch.compile first call ms"], rows), ""]
    out += [f"- FAILED: {f}" for f in lat.get("failures", [])]
    return out + ([""] if lat.get("failures") else [])


def plot(merged, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare_torch.py: matplotlib is not installed: plot skipped (the table and JSON are written)")
        return False
    ceiling = merged.get("ceiling_gbps") or 0
    results = merged["results"]
    sweep = [r for r in results if r["name"] == SWEEP]
    bars = [r for r in results if r["name"] != SWEEP and r["calls_per_trial"] == 1 and not is_matmul(r)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(18, 6.5), gridspec_kw={"width_ratios": [1, 1.6]})
    for source, side, label in VARIANTS:
        points = [(r["numel"], s["gbps"]) for r in sweep if (s := side_of(r, source, side))]
        if points:
            left.plot(*zip(*points), marker="o", label=label)
    if ceiling:
        left.axhline(ceiling, linestyle="--", color="gray", label=f"copy ceiling {ceiling:.0f} GB/s")
    left.set_xscale("log", base=2)
    left.set(xlabel="elements (float32)", ylabel="GB/s (minimal bytes / median)", title=f"{SWEEP}: manual_gelu")
    left.legend(fontsize=8)
    left.grid(True, alpha=0.3)
    width = 0.8 / len(VARIANTS)
    for k, (source, side, label) in enumerate(VARIANTS):
        xs = [i + (k - 2) * width for i, r in enumerate(bars)]
        ys = [(s["gbps"] if (s := side_of(r, source, side)) else 0) for r in bars]
        right.bar(xs, ys, width, label=label)
    if ceiling:
        right.axhline(ceiling, linestyle="--", color="gray")
    right.set_xticks(range(len(bars)))
    short = {"float32": "f32", "bfloat16": "bf16"}
    right.set_xticklabels([f"{r['name']}\n{'x'.join(map(str, r['shape']))} {short.get(r['dtype'], r['dtype'])}"
                           for r in bars],
                          rotation=45, ha="right", fontsize=7)
    right.set(ylabel="GB/s", title="per workload")
    right.legend(fontsize=8)
    fig.suptitle(f"fusebox vs PyTorch on {merged['device_name']}, {merged['torch_meta']['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def merged_case_ok(r):
    """PyTorch's checks of the case passed (fusebox's are r["ok"])."""
    t = r.get("torch", {})
    return "error" not in t and all(s.get("ok", False) for s in t.values() if s is not None)


def num(x, spec):
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)
