#!/usr/bin/env bash
# Issue #35's GPU measurement: prompt-lookup speculation (k=8 against k=0) with the real demo model
# (SmolLM2-135M-Instruct) at 1 and 8 clients, benches/speculative.py on a lent device machine.
#
# The device machine has no model hub and one call carries at most 64 MiB; the demo GGUF is 98 MB, so it
# travels in two parts, beside MLX's wheel (../shared/docs/gpu.md):
#   here, once:      bash benches/gpu_speculative.sh --split     (.gpu-m1/ and .gpu-m2/, ignored by git)
#   device call 1:   carry [".gpu-a"],  command: mkdir -p /tmp/gpu-a && cp .gpu-a/* /tmp/gpu-a/
#   device call 2:   carry [".gpu-m1"], command: mkdir -p /tmp/gpu-m && cp .gpu-m1/* /tmp/gpu-m/
#   device call 3:   carry [".gpu-m2"], command: mkdir -p /tmp/gpu-m && cp .gpu-m2/* /tmp/gpu-m/
#   device call 4:   carry [".gpu-b"],  command: .gpu-b/gpu-run bash benches/gpu_speculative.sh
#                    (timeout_s about 360; logs under $OUT come back, a line per workload as it ends)
# With #32's table (benches/gpu_table.sh, ~8 minutes) in the same session, run that right after call 1 and
# these after it: 15 minutes of device time hold both, barely. CLIENTS, K, TOKENS and ROUNDS override the
# defaults below; each client count has 150 s.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
name=SmolLM2-135M-Instruct.Q4_1.gguf
if [ "${1:-}" = "--split" ]; then
    set -e
    gguf=$(python -c "from smgpy.mlx import demo_gguf_path; print(demo_gguf_path())" | tail -n 1)
    rm -rf "$root/.gpu-m1" "$root/.gpu-m2" && mkdir -p "$root/.gpu-m1" "$root/.gpu-m2"
    for d in .gpu-m1 .gpu-m2; do echo '*' > "$root/$d/.gitignore"; done
    head -c 49000000 "$gguf" > "$root/.gpu-m1/model.part_a"
    tail -c +49000001 "$gguf" > "$root/.gpu-m2/model.part_b"
    sha256sum "$gguf" | cut -c1-64 > "$root/.gpu-m2/model.sha256"
    du -sh "$root/.gpu-m1" "$root/.gpu-m2"
    exit 0
fi
out=${OUT:-gpu-out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
export SMGPY_CACHE=${SMGPY_CACHE:-/tmp/smgpy-cache}
gguf=$SMGPY_CACHE/demo/$name
if [ ! -f "$gguf" ]; then
    mkdir -p "$SMGPY_CACHE/demo"
    cat /tmp/gpu-m/model.part_a /tmp/gpu-m/model.part_b > "$gguf.tmp" || { echo "a model part is missing: run calls 2 and 3"; exit 3; }
    [ "$(sha256sum "$gguf.tmp" | cut -c1-64)" = "$(cat /tmp/gpu-m/model.sha256)" ] || { echo "model checksum differs"; exit 3; }
    mv "$gguf.tmp" "$gguf"
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1 || true
cd "$root/benches"
for clients in ${CLIENTS:-1 8}; do
    # shellcheck disable=SC2086 # K holds separate arguments
    timeout 150 python3 speculative.py --cpu-blas off --model "$gguf" --k ${K:-8} --clients "$clients" \
        --rounds "${ROUNDS:-1}" --max-tokens "${TOKENS:-512}" --workloads edit alike summary chat \
        > "$out/speculative-$clients.log" 2>&1
    echo "speculative, $clients client(s): exit $?"
    grep "client(s)" "$out/speculative-$clients.log"
done
