#!/usr/bin/env bash
# On a GPU machine (cupy + CUDA torch): every cupy test, then bench/gpu.py. Writes under $OUT
# (or ./gpu_out) and prints the summary lines and failures.
set -u
out="${OUT:-gpu_out}"; mkdir -p "$out"
opts="-p no:cacheprovider -o addopts= -q"
timeout 200 python3 -m pytest $opts -n 16 tests/test_cupy.py tests/test_vmap_cupy.py \
  > "$out/cupy.txt" 2>&1
timeout 120 python3 -m pytest $opts -n 8 -k cupy tests/test_check_function.py \
  tests/test_curvature.py tests/test_graphio.py tests/test_scipy.py tests/test_transforms.py \
  tests/test_solvers.py > "$out/cupy2.txt" 2>&1
for f in "$out/cupy.txt" "$out/cupy2.txt"; do tail -n 1 "$f"; grep -E "^(FAILED|ERROR)" "$f" | head -25; done
timeout 150 python3 -m bench.gpu --repeat 20 > "$out/gpu_bench.txt" 2>&1
grep -v "^ " "$out/gpu_bench.txt" | head -40
