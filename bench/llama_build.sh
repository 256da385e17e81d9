#!/usr/bin/env bash
# Measure llama-cpp-python's from-source build under different CMake flags, one after
# the other in the same session (the machine's load changes: compare within a run).
#   bench/llama_build.sh [OUT_DIR]     -> OUT_DIR/results.tsv, one wheel per variant
# Each variant builds with a cold pip cache in a throwaway venv under OUT_DIR, never in
# .venv. Variants: "llava-off" (scripts/install before), "lib-only" (scripts/install now).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-/tmp/llama-build-bench}"
VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
mkdir -p "$OUT"
[ -x "$OUT/venv/bin/python" ] || python3 -m venv "$OUT/venv"
# Variants may repeat (VARIANTS="a b a b"): interleaved, load swings hit both alike.
declare -A FLAGS=(
  [llava-off]="-DLLAVA_BUILD=OFF"
  [lib-only]="-DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE=$REPO/scripts/llama-cpp-lib-only.cmake"
)
[ -f "$OUT/results.tsv" ] ||
  printf 'variant\twall_s\tcpu_s\tcompile_steps\twheel_bytes\tload_before\tcmake_args\n' >"$OUT/results.tsv"
for variant in ${VARIANTS:-llava-off lib-only}; do
  rm -rf "$OUT/$variant" && mkdir -p "$OUT/$variant"
  load=$(cut -d' ' -f1 /proc/loadavg)
  # Wall time swings with the other users of the 2 cores; CPU time (user + sys of the
  # whole build) is the figure to compare.
  CMAKE_ARGS="${FLAGS[$variant]}" /usr/bin/time -f '%e %U %S' -o "$OUT/$variant.time" \
    "$OUT/venv/bin/python" -m pip wheel --no-deps --no-cache-dir \
    --no-binary llama-cpp-python -v -w "$OUT/$variant" "llama-cpp-python==$VERSION" \
    >"$OUT/$variant.log" 2>&1
  read -r seconds user sys <"$OUT/$variant.time"
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.0f", u + s }')
  # ninja's "[n/N]" progress lines are indented in pip's verbose output.
  steps=$(grep -oE '\[[0-9]+/[0-9]+\]' "$OUT/$variant.log" | tail -1 | tr -d '[]' | cut -d/ -f2 || true)
  wheel=$(ls "$OUT/$variant"/llama_cpp_python-*.whl)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$variant" "$seconds" "$cpu" "$steps" "$(stat -c %s "$wheel")" \
    "$load" "${FLAGS[$variant]}" >>"$OUT/results.tsv"
  echo "$variant: ${seconds}s wall, ${cpu}s CPU, $steps compile steps (load before: $load)"
done
