#!/usr/bin/env bash
# Mutation testing with mutmut (pip install -e ".[mutation]"), outside the default suite; run it
# with the environment that has the package and mutmut active (its python is used).
#
#   scripts/mutation.sh [target ...]     targets: params duck xxh64 (default: all three)
#
# Each target mutates one module and runs only the fast tests that cover it; the run works
# on a copy of the package and tests in a temporary folder, never on the checkout. The
# kernel target runs with NUMBA_DISABLE_JIT=1 and the copy's @njit lines removed (mutmut
# leaves decorated functions alone; without the JIT the decorator is the identity anyway).
# Prints, per target, mutmut's counts: total, killed, survived, no tests, timeout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(params duck xxh64)
children="${MUTATION_CHILDREN:-2}"

for target in "${targets[@]}"; do
    case "$target" in
        params) module=lance_minhash_sql/params.py; tests="tests/test_params.py"; select="" ;;
        duck) module=lance_minhash_sql/duck/udfs.py; tests="tests/test_duck.py"; select="" ;;
        xxh64) module=lance_minhash_sql/kernels/xxh64.py; tests="tests/test_signatures.py::test_xxh64_small_inputs_match_xxhash"; select="" ;;
        *) echo "unknown target: $target" >&2; exit 2 ;;
    esac
    work="$(mktemp -d "${TMPDIR:-/tmp}/lms-mutation-$target-XXXXXX")"
    cp -r "$root/lance_minhash_sql" "$root/tests" "$work/"
    find "$work" -name __pycache__ -prune -exec rm -rf {} +
    env=()
    if [ "$target" = xxh64 ]; then
        sed -i '/^@njit/d' "$work/$module"
        env=(NUMBA_DISABLE_JIT=1)
    fi
    cat > "$work/setup.cfg" <<CFG
[mutmut]
source_paths = lance_minhash_sql
only_mutate = $module
pytest_add_cli_args_test_selection = $tests
pytest_add_cli_args = -p no:cacheprovider -q -x -W ignore::RuntimeWarning $select
also_copy = tests
CFG
    echo "== $target: $module against $tests $select (in $work)"
    (cd "$work" && env -u PYTHONPATH "${env[@]}" python -m mutmut run --max-children "$children" > run.log 2>&1 || true
     env -u PYTHONPATH python -m mutmut export-cicd-stats > /dev/null 2>&1
     python - <<'PY'
import json
s = json.load(open("mutants/mutmut-cicd-stats.json"))
print(f"mutants {s['total']}, killed {s['killed']}, survived {s['survived']}, no tests {s['no_tests']}, "
      f"timeout {s['timeout']}, suspicious {s['suspicious']}, segfault {s['segfault']}")
PY
     env -u PYTHONPATH python -m mutmut results 2>/dev/null | grep -E "survived|no tests" > survivors.txt || true
     echo "survivors listed in $work/survivors.txt (mutmut show NAME in $work shows one)")
done
