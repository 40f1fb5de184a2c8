set -u
mkdir -p $OUT
O="-p no:cacheprovider -o addopts= -q"
timeout 200 python3 -m pytest $O -n 16 tests/test_cupy.py tests/test_vmap_cupy.py > $OUT/cupy.txt 2>&1
timeout 120 python3 -m pytest $O -n 8 -k cupy tests/test_check_function.py tests/test_curvature.py tests/test_graphio.py tests/test_scipy.py tests/test_transforms.py tests/test_solvers.py > $OUT/cupy2.txt 2>&1
tail -3 $OUT/cupy.txt $OUT/cupy2.txt
grep -E "^(FAILED|ERROR)" $OUT/cupy.txt $OUT/cupy2.txt | head -40
timeout 150 python3 -m bench.gpu --repeat 20 > $OUT/gpu_bench.txt 2>&1; grep -v "^ \|^Traceback\|^  " $OUT/gpu_bench.txt | head -40
timeout 150 python3 -m pytest -p no:cacheprovider -q -n 16 -p no:randomly > $OUT/full.txt 2>&1; tail -3 $OUT/full.txt; grep -E "^(FAILED|ERROR)" $OUT/full.txt | head -30
