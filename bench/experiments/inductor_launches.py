"""torch.compile's kernels for the bench's row workloads on this GPU: the
launch each one ran with (grid, block, registers, shared memory, from
torch.profiler's trace) and its median time; run with TORCH_LOGS=output_code
to also get the Triton source. For comparing fusebox's row layouts with
Inductor's (bench/NOTES.md, session 8). Not part of the build or the bench.

  TORCH_LOGS=output_code python3 bench/experiments/inductor_launches.py 2> inductor_code.txt
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402
from compare_torch import torch_workloads  # noqa: E402

CASES = [
    ("manual_softmax", [(32768, 1024)]),
    ("manual_softmax", [(8192, 8192)]),
    ("manual_layer_norm", [(16384, 4096), (4096,), (4096,)]),
    ("manual_rms_norm", [(16384, 4096), (4096,)]),
    ("col_sum", [(8192, 8192)]),
]


def launches(fn, args):
    """(name, grid, block, registers, shared bytes) of each kernel one call launches."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    out = []
    for e in events:
        if e.get("cat") != "kernel":
            continue
        a = e.get("args", {})
        out.append((e["name"], a.get("grid"), a.get("block"), a.get("registers per thread"),
                    a.get("shared memory")))
    return out


def median_ms(fn, args, trials=50):
    times = []
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for _ in range(trials):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    workloads = torch_workloads(torch)
    for name, shapes in CASES:
        torch._dynamo.reset()
        fn = torch.compile(workloads[name][0])
        args = [torch.randn(s, device="cuda") for s in shapes]
        for _ in range(3):
            fn(*args)
        torch.cuda.synchronize()
        ms = median_ms(fn, args)
        moved = sum(a.numel() * a.element_size() for a in args) + fn(*args).numel() * 4
        print(f"{name} {shapes[0]}: {ms:.4f} ms, {moved / ms / 1e6:.0f} GB/s")
        for k in launches(fn, args):
            print(f"  {k[0]}: grid {k[1]}, block {k[2]}, {k[3]} registers, {k[4]} B shared")


if __name__ == "__main__":
    main()
