#!/usr/bin/env python3
"""fusebox_bench beside PyTorch, on the GPU, in one call.

Runs fusebox_bench --json (or reads its JSON from the same device call with
--fusebox-json), then times the same workloads at the same shapes, dtypes and
input rotation in PyTorch three ways: eager (the manual op-by-op definitions
below, the twins of bench/workloads.cc), the built-in fused op where PyTorch
has one, and torch.compile of the manual definition; for the matmul workloads
a fourth, the GEMMs alone in eager PyTorch (TF32 off); for gpt2_forward
nanoGPT's model (bench/compare_gpt2.py), eager and compiled. Timing mirrors
bench/harness.cc: warm-up calls, then trials each timed with CUDA events (the
call-overhead case: batches of calls on the host clock), median and min.
Writes <out>/<date>-<machine>.md (tables), .png (GB/s against size for the
gelu sweep; bars per workload; skipped with a message without matplotlib)
and .json (fusebox's results with PyTorch's merged in).

  python3 bench/compare_torch.py [--fusebox PATH | --fusebox-json PATH] [--quick]
                                 [--filter WORD,...] [--out DIR] [--machine NAME]

Exit status: 0 every check passed, 1 a check failed, 2 it could not run (no
PyTorch, no CUDA device, no fusebox_bench, fusebox_bench failed to run).
"""

import argparse
import datetime
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compare_gpt2 import run_gpt2_case
from compare_report import merged_case_ok, plot, write_markdown
from compare_sweep import plot_sweep, run_sweep, write_sweep_markdown

REPO = Path(__file__).resolve().parent.parent
REL_ERR_TOL = {"float32": 1e-5, "bfloat16": 1e-2}  # as bench/suite.cc
FLUSH_BYTES = 256 << 20  # zeroed before each timed trial, as bench/harness.h kFlushBytes
FLUSH_MODE = "zero"  # or "read": set from fusebox_bench's JSON ("flush") in main()


def fail(message):
    print(f"compare_torch.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fusebox", help="the fusebox_bench binary (default: build-device/dist/bin/fusebox_bench, "
                   "else fusebox_bench on PATH, else build/bench/fusebox_bench)")
    p.add_argument("--fusebox-json", help="use this fusebox_bench --json output (from the same device call) "
                   "instead of running fusebox_bench")
    p.add_argument("--quick", action="store_true", help="small sizes (fusebox_bench --quick)")
    p.add_argument("--filter", default="", help="only these cases (fusebox_bench --filter)")
    p.add_argument("--out", default=str(REPO / "bench" / "results"), help="where to write .md, .png and .json")
    p.add_argument("--machine", help="the machine's name in the file names (default: the GPU's name)")
    p.add_argument("--no-profile", action="store_true", help="skip torch.profiler (PyTorch's kernel names)")
    return p.parse_args()


def import_torch():
    try:
        import torch
    except ImportError as e:
        fail(f"PyTorch is not installed for {sys.executable} ({e}). Run this where PyTorch and a GPU are: "
             "on the lent H200, bench/device_run.sh remote runs it.")
    if not torch.cuda.is_available():
        fail(f"PyTorch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False); "
             "the comparison needs the GPU.")
    return torch


class TimeLimit(BaseException):  # not caught by the per-variant `except Exception`
    pass


def on_sigterm(signum, frame):
    raise TimeLimit()


# --- fusebox_bench

def find_fusebox(path):
    if path:
        return Path(path)
    for candidate in (REPO / "build-device/dist/bin/fusebox_bench", shutil.which("fusebox_bench"),
                      REPO / "build/bench/fusebox_bench"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    fail("no fusebox_bench found (build-device/dist/bin, PATH, build/bench); build it or pass --fusebox PATH")


def run_fusebox(args):
    """fusebox_bench's results as a dict: read from --fusebox-json, or from a run now."""
    if args.fusebox_json:
        with open(args.fusebox_json) as f:
            return json.load(f)
    binary = find_fusebox(args.fusebox)
    env = dict(os.environ)
    lib = binary.resolve().parent.parent / "lib"  # dist/lib beside dist/bin: the libraries the device lacks
    if lib.is_dir():
        env["LD_LIBRARY_PATH"] = f"{lib}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else str(lib)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "fusebox.json"
        cmd = [str(binary), "--device", "cuda", "--json", str(out)] + (["--quick"] if args.quick else [])
        cmd += ["--filter", args.filter] if args.filter else []
        print("==", " ".join(cmd), flush=True)
        code = subprocess.call(cmd, env=env)
        if not out.is_file():
            fail(f"fusebox_bench exited {code} without writing its JSON")
        if code != 0:
            print(f"compare_torch.py: fusebox_bench exited {code} (a check failed); merging what it measured",
                  file=sys.stderr)
        with open(out) as f:
            return json.load(f)


# --- the workloads in PyTorch: keep in step with bench/workloads.cc

def torch_workloads(torch):
    F = torch.nn.functional

    def manual_gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def add_mul_tanh(a, b, c):
        return torch.tanh((a + b) * c)

    def manual_softmax(x):  # the seed's
        x = x - x.max(dim=-1, keepdim=True).values
        numerator = torch.exp(x)
        return numerator / numerator.sum(dim=-1, keepdim=True)

    def manual_layer_norm(x, weight, bias):
        centered = x - x.mean(dim=-1, keepdim=True)
        var = (centered * centered).mean(dim=-1, keepdim=True)
        return centered * torch.rsqrt(var + 1e-5) * weight + bias

    def manual_rms_norm(x, weight):
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * weight

    def row_sum(x):
        return x.sum(-1)

    def col_sum(x):
        return x.sum(0)

    def rms_builtin(x, w):  # F.rms_norm: torch >= 2.4
        return F.rms_norm(x, x.shape[-1:], w, eps=1e-6)

    def gemm_bias_gelu(x, w, b):  # x [M, K], w [K, N], b [N]
        return F.gelu(x @ w + b, approximate="tanh")

    def mlp(x, weights, biases):  # the seed's: weights [L, out, in] as nn.Linear, biases [L, dim]
        for l in range(weights.shape[0]):
            x = F.gelu(F.linear(x, weights[l], biases[l]))
        return x

    def mlp_gemms(x, weights, biases):
        for l in range(weights.shape[0]):
            x = F.linear(x, weights[l])
        return x
    # workload name -> (manual definition, built-in or None, the GEMMs alone or None)
    return {
        "manual_gelu": (manual_gelu, lambda x: F.gelu(x, approximate="tanh"), None),
        "add_mul_tanh": (add_mul_tanh, None, None),
        "manual_softmax": (manual_softmax, lambda x: torch.softmax(x, -1), None),
        "manual_layer_norm": (manual_layer_norm, lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, eps=1e-5),
                              None),
        "manual_rms_norm": (manual_rms_norm, rms_builtin if hasattr(F, "rms_norm") else None, None),
        "row_sum": (row_sum, row_sum, None),
        "col_sum": (col_sum, col_sum, None),
        # cuBLASLt's GELU_BIAS epilogue (tanh gelu)
        "gemm_bias_gelu": (gemm_bias_gelu, lambda x, w, b: torch._addmm_activation(b, x, w, use_gelu=True),
                           lambda x, w, b: x @ w),
        "mlp": (mlp, None, mlp_gemms),
    }


# --- timing, as bench/harness.cc

def time_trials(torch, fn, sets, warmup, trials, calls_per_trial):
    """ms per call of each trial; call k uses input set k mod len(sets)."""
    calls = 0

    def step():
        nonlocal calls
        fn(*sets[calls % len(sets)])
        calls += 1

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    if calls_per_trial == 1:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # As fusebox_bench (and do_bench): zero 256 MB before each trial, so the
        # L2 is evicted and the GPU is busy while the host launches the call.
        # With fusebox_bench's FUSEBOX_BENCH_FLUSH=read (its JSON's "flush"),
        # sum them instead, as it did: no dirty lines left to write back.
        by_reading = FLUSH_MODE == "read"
        flush = torch.zeros(FLUSH_BYTES // 4, dtype=torch.float32 if by_reading else torch.int32, device="cuda")
        for _ in range(trials):
            if by_reading:
                flush.sum()
            else:
                flush.zero_()
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(trials):
            t0 = time.perf_counter()
            for _ in range(calls_per_trial):
                step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3 / calls_per_trial)
    return times


def timed_once_ms(torch, fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, (time.perf_counter() - t0) * 1e3


def median(xs):
    s = sorted(xs)
    n = len(s)
    return (s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])) if n else float("nan")


def short_kernel_name(name):
    n = name[5:] if name.startswith("void ") else name
    return re.split(r"[<(]", n, maxsplit=1)[0].rsplit("::", 1)[-1]


def kernel_names(torch, fn, args):
    """The GPU kernels one call launches, by torch.profiler (None if it fails)."""
    from torch.profiler import ProfilerActivity, profile
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn(*args)
            torch.cuda.synchronize()
        return [e.name for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))]
    except Exception as e:  # the profiler is a nice-to-have
        print(f"  torch.profiler failed: {e}", file=sys.stderr)
        return None


def rel_err(torch, out, ref):
    out, ref = out.double(), ref.double()
    if out.shape != ref.shape or not torch.isfinite(out).all():
        return float("nan")
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def run_variant(torch, fn, sets, r, ref, profile, compile_first=False, output=None, tol=None):
    """One side of a case: first call, check, trials. output picks what is
    checked from fn's result (all of it by default); tol overrides the
    dtype's tolerance."""
    side = {}
    if compile_first:
        torch._dynamo.reset()
        # The replay row (CompileOptions::replay) sits beside CUDA-graph replay.
        mode = "reduce-overhead" if r.get("replay") else None
        fn = torch.compile(fn, dynamic=False, mode=mode)
    out, side["cold_ms"] = timed_once_ms(torch, lambda: fn(*sets[0]))
    side["rel_err"] = rel_err(torch, output(out) if output else out, ref)
    side["ok"] = side["rel_err"] <= (tol or REL_ERR_TOL.get(r["dtype"], 1e-5))  # NaN fails
    del out
    trials = time_trials(torch, fn, sets, r["warmup"], r["trials"], r["calls_per_trial"])
    side.update(median_ms=median(trials), min_ms=min(trials), gbps=r["bytes"] / (median(trials) * 1e-3) / 1e9,
                trials_ms=trials)
    if r.get("flops"):
        side["tflops"] = r["flops"] / (side["median_ms"] * 1e-3) / 1e12
    names = kernel_names(torch, fn, sets[0]) if profile else None
    if names is not None:
        side.update(kernels_per_call=len(names), kernels=[short_kernel_name(n) for n in names], kernels_full=names)
    return side


def run_torch_case(torch, workloads, r, profile):
    if r["workload"] == "gpt2_forward":  # a whole model: compare_gpt2.py builds it from r["config"]
        return run_gpt2_case(torch, r, run_variant, profile)
    if r["workload"] not in workloads:
        return {"error": f"no PyTorch definition of {r['workload']}"}
    manual, builtin, gemms = workloads[r["workload"]]
    dtype = getattr(torch, r["dtype"])
    gen = torch.Generator(device="cuda").manual_seed(len(r["shape"]) * 7919 + r["numel"])
    # As fusebox_bench: input i is randn(shape_i) * input_scales[i], then cast.
    scales = r.get("input_scales") or [1.0] * len(r["input_shapes"])
    first = [(torch.randn(s, device="cuda", generator=gen) * scale).to(dtype)
             for s, scale in zip(r["input_shapes"], scales)]
    # The same rotation as fusebox_bench: copies of the first set in buffers of their own.
    sets = [first] + [[t.clone() for t in first] for _ in range(r["input_sets"] - 1)]
    nbytes = sum(t.numel() * t.element_size() for t in first)
    ref = manual(*[t.double() for t in first])
    nbytes += ref.numel() * first[0].element_size()
    if nbytes != r["bytes"]:
        print(f"  note: {r['name']}: PyTorch counts {nbytes} minimal bytes, fusebox {r['bytes']:.0f}")
    result = {}
    variants = [("eager", manual, False), ("builtin", builtin, False), ("compiled", manual, True)]
    variants += [("gemms", gemms, False)] if gemms else []
    for side, fn, compile_first in variants:
        if fn is None:
            result[side] = None
            continue
        try:
            if side == "gemms":  # checked against its own float64 twin: no bias, no activation
                ref = gemms(*[t.double() for t in first])
            result[side] = run_variant(torch, fn, sets, r, ref, profile, compile_first)
        except Exception as e:  # one failing variant (an Inductor error, say) does not end the run
            result[side] = {"error": f"{type(e).__name__}: {e}", "ok": False}
            print(f"  {r['name']} {side}: {result[side]['error']}", file=sys.stderr)
    del sets, first, ref
    torch.cuda.empty_cache()
    return result


def torch_copy_gbps(torch, warmup, trials):
    src = torch.randn(1 << 28, device="cuda")  # 1 GiB, as fusebox_bench's copy
    dst = torch.empty_like(src)
    times = time_trials(torch, lambda: dst.copy_(src), [[]], warmup, trials, 1)
    ok = bool(torch.equal(dst, src))
    return {"bytes": src.numel() * 4, "median_ms": median(times), "ok": ok,
            "gbps": 2 * src.numel() * 4 / (median(times) * 1e-3) / 1e9}


def json_safe(x):
    """NaN and infinities as null, as fusebox_bench writes them (JSON has neither)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [json_safe(v) for v in x]
    return x


def main():
    args = parse_args()
    torch = import_torch()
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 GEMMs in full float32, as fusebox's
    fb = run_fusebox(args)
    global FLUSH_MODE
    FLUSH_MODE = fb.get("flush", "zero")
    if not fb.get("device", "").startswith("cuda"):
        fail(f"fusebox_bench ran on {fb.get('device')}, not the GPU: nothing to compare")
    props = torch.cuda.get_device_properties(0)
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    machine = args.machine or re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name(0).lower()).strip("-")
    fb["torch_meta"] = {"date": date, "machine": machine, "torch": torch.__version__, "triton": triton_version,
                        "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
                        "l2_bytes": getattr(props, "L2_cache_size", 0),
                        "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                        "torch_copy": torch_copy_gbps(torch, fb["warmup"], fb["trials"])}
    print(f"== PyTorch {torch.__version__} on {torch.cuda.get_device_name(0)}: "
          f"copy_ {fb['torch_meta']['torch_copy']['gbps']:.0f} GB/s", flush=True)
    workloads = torch_workloads(torch)
    signal.signal(signal.SIGTERM, on_sigterm)  # `timeout` in device_run.sh: keep what was measured
    if fb.get("sweep"):
        return main_sweep(args, torch, fb, date, machine)
    try:
        for i, r in enumerate(fb["results"]):
            start = time.perf_counter()
            r["torch"] = run_torch_case(torch, workloads, r, not args.no_profile)
            t = r["torch"]
            print(f"[{i + 1:2}/{len(fb['results'])}] {r['name']:17} {r['dtype']:8} {str(r['shape']):15} "
                  + "  ".join(f"{d} {t[d]['median_ms']:.4f}" for d in ("eager", "builtin", "compiled", "gemms")
                              if t.get(d) and "median_ms" in t[d])
                  + f"  ({time.perf_counter() - start:.1f} s){'' if merged_case_ok(r) else '  FAILED'}", flush=True)
    except TimeLimit:
        print("compare_torch.py: SIGTERM (the time limit): writing the cases measured so far", flush=True)
        for r in fb["results"]:
            r.setdefault("torch", {"error": "not run (time limit)"})

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a late one must not lose what is written next
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{date}-{machine}" + ("-quick" if fb["quick"] else "") + ("-readflush" if FLUSH_MODE == "read" else "")
    (out_dir / f"{stem}.json").write_text(json.dumps(json_safe(fb), indent=1) + "\n")
    png = out_dir / f"{stem}.png"
    plotted = plot(fb, png)
    write_markdown(fb, out_dir / f"{stem}.md", png.name if plotted else None)
    print(f"wrote {out_dir / stem}.json, .md{', .png' if plotted else ''}")
    ok = fb["ok"] and all(merged_case_ok(r) for r in fb["results"])
    md = (out_dir / f"{stem}.md").read_text()
    print(md.split("## GB/s")[0])
    if "## Matmul" in md:
        print("## Matmul" + md.split("## Matmul")[1].split("\n## ")[0] + "\n")
    if "## Compile latency" in md:
        print("## Compile latency" + md.split("## Compile latency")[1].split("![")[0])
    print(f"result: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


def main_sweep(args, torch, fb, date, machine):
    """fusebox_bench --sweep's grid beside PyTorch: <date>-<machine>-sweep.md, .png, .json."""
    try:
        run_sweep(torch, fb, time_trials, median)
    except TimeLimit:
        print("compare_torch.py: SIGTERM (the time limit): writing the cases measured so far", flush=True)
    for case in fb["sweep"]:
        case.setdefault("torch", {"error": "not run (time limit)"})
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{date}-{machine}-sweep" + ("-quick" if fb["quick"] else "")
    (out_dir / f"{stem}.json").write_text(json.dumps(json_safe(fb), indent=1) + "\n")
    png = out_dir / f"{stem}.png"
    plotted = plot_sweep(fb, png)
    write_sweep_markdown(fb, out_dir / f"{stem}.md", png.name if plotted else None)
    print(f"wrote {out_dir / stem}.json, .md{', .png' if plotted else ''}")
    print((out_dir / f"{stem}.md").read_text().split("## Every shape")[0])
    ok = fb["ok"]
    print(f"result: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
