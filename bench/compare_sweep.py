"""compare_torch.py's --sweep side: fusebox_bench --sweep's grid (bench/sweep.cc)
timed in PyTorch, eager and torch.compile, in the same call; a table per
class with the ratio fusebox / torch.compile (speed: >1 is fusebox faster),
its geomean, the share of the copy ceiling, and a plot of the ratios.
Keep the functions and layouts in step with bench/sweep.cc."""

import math
import sys
import time

GOAL_MIN_RATIO = 0.95   # every grid shape of >= 2^22 elements
GOAL_GEOMEAN = 1.1      # per class
GOAL_CEILING = 0.85     # memory-bound shapes of >= 2^24 elements
BIG = 1 << 22
HUGE = 1 << 24


def sweep_fn(torch, case):
    F = torch.nn.functional
    d = case["dim"]

    def gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def layer_norm(x, w, b):
        if d == -1:
            return F.layer_norm(x, x.shape[-1:], w, b, eps=1e-5)
        centered = x - x.mean(dim=d, keepdim=True)
        return centered * torch.rsqrt((centered * centered).mean(dim=d, keepdim=True) + 1e-5) * w + b

    def rms_norm(x, w):
        if d == -1 and hasattr(F, "rms_norm"):
            return F.rms_norm(x, x.shape[-1:], w, eps=1e-6)
        return x * torch.rsqrt((x * x).mean(dim=d, keepdim=True) + 1e-6) * w

    op = case["op"]
    if op == "gelu":
        return (lambda x, col: gelu(x + col)) if case["layout"] == "broadcast" else gelu
    return {"sum": lambda x: x.sum(d), "softmax": lambda x: torch.softmax(x, d),
            "log_softmax": lambda x: torch.log_softmax(x, d), "layer_norm": layer_norm,
            "rms_norm": rms_norm, "copy": lambda x: x.clone()}[op]


def sweep_inputs(torch, case, gen):
    """The inputs in the case's layout, as MakeSweepInputs in bench/sweep.cc."""
    dtype = getattr(torch, case["dtype"])
    shape = case["shape"]

    def draw(s):
        return torch.randn(s, device="cuda", generator=gen).to(dtype)

    layout = case["layout"]
    if layout == "transposed":
        x = draw([shape[1], shape[0]]).t()
    elif layout == "permuted":
        x = draw([shape[2], shape[0], shape[1]]).permute(1, 2, 0)
    elif layout == "sliced":
        x = draw(shape[:-1] + [shape[-1] + 3]).narrow(-1, 1, shape[-1])
    else:
        x = draw(shape)
    inputs = [x]
    if layout == "broadcast":
        inputs.append(draw([shape[0], 1]))
    if case["op"] in ("layer_norm", "rms_norm"):
        d = case["dim"] % len(shape)
        s = [shape[-1]] if case["dim"] == -1 else [shape[i] if i == d else 1 for i in range(len(shape))]
        inputs.append(draw(s))
        if case["op"] == "layer_norm":
            inputs.append(draw(s))
    return inputs


def run_sweep(torch, fb, time_trials, median):
    """Times every sweep case in PyTorch (eager, torch.compile); adds case["torch"]."""
    cases = fb["sweep"]
    warmup, trials = min(fb["warmup"], 5), min(fb["trials"], 20)
    for i, case in enumerate(cases):
        start = time.perf_counter()
        gen = torch.Generator(device="cuda").manual_seed(1000 + i)
        first = sweep_inputs(torch, case, gen)
        nbytes = sum(t.numel() * t.element_size() for t in first)
        per_set = nbytes + math.prod(sweep_fn(torch, case)(*first).shape) * first[0].element_size()
        # Rotated as fusebox_bench's: sets of their own, drawn alike (in the same layout).
        sets = [first] + [sweep_inputs(torch, case, gen)
                          for _ in range(max(1, min(64, math.ceil(2 * fb["cache_bytes"] / per_set))) - 1)]
        result = {}
        for side in ("eager", "compiled"):
            fn = sweep_fn(torch, case)
            try:
                if side == "compiled":
                    torch._dynamo.reset()
                    fn = torch.compile(fn, dynamic=False)
                    fn(*first)
                # torch.compile's medians of one shape varied 1.2-3x between runs
                # (bench/NOTES.md): time it in two rounds and keep its faster one,
                # so a ratio reads its best, not a bad round.
                rounds = [time_trials(torch, fn, sets, warmup, trials, 1)
                          for _ in range(2 if side == "compiled" else 1)]
                times = min(rounds, key=median)
                result[side] = {"median_ms": median(times), "min_ms": min(times),
                                "gbps": case["bytes"] / (median(times) * 1e-3) / 1e9,
                                "round_medians_ms": [median(r) for r in rounds]}
            except Exception as e:  # an Inductor error ends one variant, not the run
                result[side] = {"error": f"{type(e).__name__}: {e}"}
        case["torch"] = result
        del sets, first
        torch.cuda.empty_cache()
        t = result
        print(f"[{i + 1:3}/{len(cases)}] {case['name']:48} fusebox {case['median_ms']:.4f}  "
              + "  ".join(f"{s} {t[s]['median_ms']:.4f}" for s in ("eager", "compiled") if "median_ms" in t[s])
              + f"  ({time.perf_counter() - start:.1f} s)", flush=True)


def ratio(case):
    """torch.compile's time over fusebox's: above 1, fusebox is faster."""
    t = case.get("torch", {}).get("compiled", {})
    if "median_ms" not in t or not case.get("median_ms"):
        return None
    return t["median_ms"] / case["median_ms"]


def numel(case):
    return math.prod(case["shape"])


def summarize(fb):
    """Per class: geomean ratio over the big shapes, the worst, the misses."""
    ceiling = fb.get("ceiling_gbps") or 0
    classes = {}
    for case in fb["sweep"]:
        classes.setdefault(case["class"], []).append(case)
    rows = []
    for cls, cases in classes.items():
        big = [c for c in cases if numel(c) >= BIG and ratio(c)]
        logs = [math.log(ratio(c)) for c in big]
        geo = math.exp(sum(logs) / len(logs)) if logs else float("nan")
        worst = min(big, key=ratio) if big else None
        huge = [c for c in cases if numel(c) >= HUGE and c.get("gbps")]
        min_ceil = min((c["gbps"] / ceiling for c in huge), default=float("nan")) if ceiling else float("nan")
        rows.append({"class": cls, "geomean": geo, "worst": worst, "min_ceiling": min_ceil,
                     "misses": [c for c in big if ratio(c) < GOAL_MIN_RATIO]})
    return rows


def write_sweep_markdown(fb, path, png_name):
    ceiling = fb.get("ceiling_gbps") or 0
    rows = summarize(fb)
    meta = fb.get("torch_meta", {})
    lines = [f"# fusebox_bench --sweep beside PyTorch {meta.get('torch', '?')} ({meta.get('device', '?')}, "
             f"{meta.get('date', '?')})", "",
             "Every class of work over odd shapes (bench/sweep.cc); ratio = torch.compile's median time over "
             "fusebox compiled's (above 1: fusebox faster). Goals: every shape of >= 2^22 elements at >= "
             f"{GOAL_MIN_RATIO}, geomean >= {GOAL_GEOMEAN} per class, shapes of >= 2^24 elements at >= "
             f"{int(GOAL_CEILING * 100)}% of the copy ceiling ({ceiling:.0f} GB/s).", "",
             "## Per class", "",
             "| class | geomean ratio (>= 2^22) | worst shape | worst ratio | min % ceiling (>= 2^24) | shapes below "
             f"{GOAL_MIN_RATIO} |", "|---|---|---|---|---|---|"]
    for r in rows:
        w = r["worst"]
        lines.append(f"| {r['class']} | {r['geomean']:.2f} | {w['name'] if w else '-'} | "
                     f"{ratio(w) if w else float('nan'):.2f} | {100 * r['min_ceiling']:.0f}% | {len(r['misses'])} |")
    allc = [c for c in fb["sweep"] if ratio(c) and numel(c) >= BIG]
    worst5 = sorted(allc, key=ratio)[:5]
    lines += ["", "## The five worst shapes (>= 2^22 elements)", ""]
    lines += [f"- {c['name']}: {ratio(c):.2f}x (fusebox {c['median_ms']:.4f} ms, {c['gbps']:.0f} GB/s; "
              f"torch.compile {c['torch']['compiled']['median_ms']:.4f} ms; kernels {', '.join(c['kernels'])})"
              for c in worst5]
    lines += ["", "## Every shape", "",
              "| case | elements | fusebox ms | fusebox GB/s | % ceiling | torch eager ms | torch.compile ms | ratio | "
              "fusebox kernels |", "|---|---|---|---|---|---|---|---|---|"]
    for c in fb["sweep"]:
        t = c.get("torch", {})
        te = t.get("eager", {}).get("median_ms")
        tc = t.get("compiled", {}).get("median_ms")
        pct = 100 * c["gbps"] / ceiling if ceiling and c.get("gbps") else float("nan")
        lines.append(f"| {c['name']} | {numel(c)} | {c['median_ms']:.4f} | {c['gbps']:.0f} | {pct:.0f}% | "
                     f"{te if te is None else f'{te:.4f}'} | {tc if tc is None else f'{tc:.4f}'} | "
                     f"{ratio(c) if ratio(c) else float('nan'):.2f} | {', '.join(c['kernels'])}"
                     f"{'' if c['ok'] else ' FAILED: ' + c['error']} |")
    if png_name:
        lines += ["", f"![fusebox / torch.compile per class]({png_name})"]
    path.write_text("\n".join(lines) + "\n")


def plot_sweep(fb, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare_sweep: no matplotlib; no plot", file=sys.stderr)
        return False
    classes = sorted({c["class"] for c in fb["sweep"]})
    fig, ax = plt.subplots(figsize=(max(8, len(classes) * 0.6), 5))
    for k, cls in enumerate(classes):
        pts = [(numel(c), ratio(c)) for c in fb["sweep"] if c["class"] == cls and ratio(c)]
        ax.scatter([k] * len(pts), [r for _, r in pts], s=[8 + 4 * math.log2(max(n, 2)) for n, _ in pts], alpha=0.6)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.axhline(GOAL_MIN_RATIO, color="red", lw=0.8, ls="--")
    ax.set_xticks(range(len(classes)))
    ax.set_xticklabels(classes, rotation=60, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("torch.compile time / fusebox time (above 1: fusebox faster)")
    ax.set_title("fusebox_bench --sweep beside torch.compile (marker size: elements)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True
