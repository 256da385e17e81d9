"""Speed of llama.cpp builds on this CPU: ``python -m bench.llama_cpu NAME=WHEEL ...``.

Issue 27: ``scripts/install`` builds llama.cpp for a portable CPU level (x86-64-v3, no
AVX-512, no AMX) instead of ``-march=native``. This measures what that costs: each
wheel's ``llama_cpp`` is unpacked into a scratch folder and run in a subprocess of its
own (the venv's numpy/jinja2 serve every build), loading the bundled SmolLM2-135M with
one thread, as toolwire does. Each round runs every build once, in turn (interleaved,
so the load of a shared machine hits all alike), and reads llama.cpp's own counters
(``llama_perf_context``): prompt tokens/s over a ~500-token prompt with a cold KV
cache, and generation tokens/s over 64 sampled tokens; both also per CPU second of
the (one-thread) process, the figure that holds on a loaded machine. Prints a table
with medians and each build's ratio to the first one named.

    python -m bench.llama_cpu native=/path/a.whl portable=/path/b.whl --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["main"]

PROMPT = (
    "Runbook: the etcd cluster has no leader. Check every member's health with "
    "etcdctl endpoint health, compare their raft terms, and look for a network "
    "partition between the control-plane nodes before restarting anything. "
) * 12

CHILD = r"""
import json, sys, llama_cpp
from toolwire.providers.llamacpp import resolve_model_path
from pathlib import Path
quiet = llama_cpp.llama_log_callback(lambda *a: None)  # kept: llama.cpp holds a pointer
llama_cpp.llama_log_set(quiet, None)
llm = llama_cpp.Llama(model_path=str(resolve_model_path("smollm2-135m", Path.cwd())),
                      n_ctx=2048, n_threads=1, seed=0, verbose=False)
def perf():
    return llama_cpp.llama_perf_context(llm._ctx.ctx)
import time
prompt = sys.argv[1]
llm.reset(); llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
c0 = time.process_time()
llm.create_completion(prompt, max_tokens=1, temperature=0.0)
p_cpu = time.process_time() - c0
p = perf()
llm.reset(); llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
c0 = time.process_time()
llm.create_completion("Once upon a time", max_tokens=64, temperature=0.8,
                      logit_bias={llm.token_eos(): -100.0})
g_cpu = time.process_time() - c0
g = perf()
info = llama_cpp.llama_print_system_info().decode()
print(json.dumps({
    "prompt_tps": 1000.0 * p.n_p_eval / p.t_p_eval_ms, "prompt_tokens": p.n_p_eval,
    "gen_tps": 1000.0 * g.n_eval / g.t_eval_ms, "gen_tokens": g.n_eval,
    "prompt_tps_cpu": p.n_p_eval / p_cpu, "gen_tps_cpu": g.n_eval / g_cpu,
    "avx512": "AVX512 = 1" in info, "amx": "AMX" in info,
}))
"""


KEYS = ("prompt_tps", "gen_tps", "prompt_tps_cpu", "gen_tps_cpu")


def _unpack(name: str, wheel: Path, root: Path) -> Path:
    target = root / name
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target, [m for m in zf.namelist() if m.startswith("llama_cpp/")])
    return target


def _measure(path: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(path)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, PROMPT], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"build at {path} failed (exit {done.returncode}): {done.stderr[-500:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("builds", nargs="+", help="NAME=WHEEL, the baseline first")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    builds = [tuple(b.split("=", 1)) for b in args.builds]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in builds}
    with tempfile.TemporaryDirectory(prefix="llama-cpu-") as tmp:
        paths = {name: _unpack(name, Path(wheel), Path(tmp)) for name, wheel in builds}
        for _ in range(args.rounds):
            for name, _wheel in builds:
                runs[name].append(_measure(paths[name]))
    base = builds[0][0]
    med = {
        name: {k: statistics.median(r[k] for r in rs) for k in KEYS} for name, rs in runs.items()
    }
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; rounds: {args.rounds}")
    print(
        "| build | AVX-512 | AMX | prompt tok/s wall | prompt tok/CPU-s | vs first"
        " | gen tok/s wall | gen tok/CPU-s | vs first |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, _ in builds:
        first = runs[name][0]
        m, b = med[name], med[base]
        print(
            f"| {name} | {'yes' if first['avx512'] else 'no'} | {'yes' if first['amx'] else 'no'}"
            f" | {m['prompt_tps']:.0f} | {m['prompt_tps_cpu']:.0f}"
            f" | {m['prompt_tps_cpu'] / b['prompt_tps_cpu']:.2f}x"
            f" | {m['gen_tps']:.1f} | {m['gen_tps_cpu']:.1f}"
            f" | {m['gen_tps_cpu'] / b['gen_tps_cpu']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
