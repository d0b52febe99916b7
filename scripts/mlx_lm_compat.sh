#!/usr/bin/env bash
# Run smgpy's MLX engine tests against the oldest and the newest mlx-lm release smgpy supports
# (the bounds in pyproject.toml) and, when one is given, against a source snapshot of mlx-lm's
# main branch, so an upstream change is seen before users see it.
#
#   scripts/mlx_lm_compat.sh                      # the two releases
#   MLX_LM_SRC=/path/to/mlx-lm scripts/mlx_lm_compat.sh   # also a checkout (or bare git dir) of main
#
# Uses the active virtualenv (with smgpy installed, e.g. `pip install -e '.[test,demo]'`) and puts
# back the mlx-lm that was installed before. Exits non-zero if any run fails.
set -uo pipefail
cd "$(dirname "$0")/.."

OLDEST=0.32.0
NEWEST=0.32.2
TESTS=(tests/test_mlx_lm_api.py tests/test_mlx_engine.py tests/test_mlx_api.py tests/test_mlx_rewrite.py)

before=$(python -c "from importlib.metadata import version; print(version('mlx-lm'))")
status=0
run() {  # $1: label; the installed mlx-lm is the one under test
    printf '\n==== mlx-lm %s\n' "$1"
    python -m pytest -q "${TESTS[@]}" || { echo "FAILED against mlx-lm $1"; status=1; }
}

for v in "$OLDEST" "$NEWEST"; do
    python -m pip install -q --no-deps "mlx-lm==$v" && run "$v"
done

if [ -n "${MLX_LM_SRC:-}" ]; then
    src=$(mktemp -d)
    if [ -d "$MLX_LM_SRC/.git" ] || [ -f "$MLX_LM_SRC/HEAD" ]; then
        git --git-dir="$( [ -d "$MLX_LM_SRC/.git" ] && echo "$MLX_LM_SRC/.git" || echo "$MLX_LM_SRC")" \
            archive HEAD | tar -x -C "$src"
    else
        cp -r "$MLX_LM_SRC/." "$src"
    fi
    python -m pip install -q --no-deps "$src" && run "main snapshot ($MLX_LM_SRC)"
    rm -rf "$src"
fi

python -m pip install -q --no-deps "mlx-lm==$before"
exit $status
