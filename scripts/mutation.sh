#!/usr/bin/env bash
# Mutation testing with mutmut (pip install -e ".[mutation]"), outside the default suite; run it
# with the environment that has the package and mutmut active (its python is used).
#
#   scripts/mutation.sh [target ...]     targets: params banding args udfs dedup xxh64 (default: all)
#   MUTANTS="name ..." scripts/mutation.sh target    only these mutants (e.g. a run's survivors)
#
#   params  lance_minhash_sql/core/params.py         the parameter rules
#   banding lance_minhash_sql/core/banding.py        the S-curve and the choice of bands
#   args    lance_minhash_sql/duck/args.py      SQL argument decoding
#   udfs    lance_minhash_sql/duck/udfs.py      the scalar UDFs' chunk handling
#   dedup   lance_minhash_sql/selfjoin/dedup.py    the keep policies and the dedup writes
#   xxh64   lance_minhash_sql/kernels/xxh64.py  a numba kernel, with the JIT off
#
# Each target mutates one module and runs only the fast tests that cover it; the run works
# on a copy of the package and tests in a temporary folder, never on the checkout. The
# kernel target runs with NUMBA_DISABLE_JIT=1 and the copy's @njit lines removed (mutmut
# leaves decorated functions alone; without the JIT the decorator is the identity anyway).
# The dedup target forks its runs from a fresh server process: its tests open Lance
# datasets, and Lance's threads do not survive a fork of the process that started them.
# Prints, per target, mutmut's counts: total, killed, survived, no tests, timeout; nice'd,
# MUTATION_CHILDREN (default 2) mutants at a time.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(params banding args udfs dedup xxh64)
children="${MUTATION_CHILDREN:-2}"

for target in "${targets[@]}"; do
    isolation=fork  # mutmut forks each mutant's run from its main process (fast)
    case "$target" in
        params) module=lance_minhash_sql/core/params.py; tests=(tests/test_params.py) ;;
        banding) module=lance_minhash_sql/core/banding.py; tests=(tests/test_params.py) ;;
        args) module=lance_minhash_sql/duck/args.py; tests=(tests/test_duck_args.py tests/test_duck.py) ;;
        udfs) module=lance_minhash_sql/duck/udfs.py; tests=(tests/test_duck_udfs.py tests/test_duck.py) ;;
        dedup) module=lance_minhash_sql/selfjoin/dedup.py
            tests=()  # the dedup tests of test_duck_pairs.py, by node id (mutmut's clean run ignores -k)
            for t in test_dedup_keep_policies_match_the_reference test_keep_policies_take_the_rows_in_batches \
                     test_keep_policies_on_a_dataset_without_near_duplicates test_longest_differs_from_first_here \
                     test_dedup_query_gives_the_deduplicated_table test_dedup_writes_a_new_dataset \
                     test_dedup_deletes_in_place_in_one_new_version test_dry_run_changes_nothing \
                     test_other_errors test_dedup_argument_errors_come_before_any_work test_dedup_uses_its_threshold \
                     test_dedup_progress_bar_counts_every_row test_dedup_checks_the_rows_it_wrote \
                     test_dedup_checks_the_rows_it_deleted test_keep_policy_message \
                     test_keep_flags_errors_name_the_dataset_and_the_default_threshold_is_0_8 \
                     test_in_place_dedup_of_a_dataset_object_reads_its_version \
                     test_in_place_with_stable_row_ids; do
                tests+=("tests/test_duck_pairs.py::$t")
            done
            isolation=forkserver ;;  # the main process has run Lance, which is not fork-safe
        xxh64) module=lance_minhash_sql/kernels/xxh64.py
            tests=(tests/test_signatures.py::test_xxh64_small_inputs_match_xxhash) ;;
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
    {   # list options: one value a line
        echo "[mutmut]"
        echo "source_paths = lance_minhash_sql"
        echo "only_mutate = $module"
        echo "also_copy = tests"
        echo "process_isolation = $isolation"
        echo "timeout_constant = 120"  # seconds on top of 15x a test's own time: a loaded machine is slow
        echo "pytest_add_cli_args_test_selection ="
        printf '    %s\n' "${tests[@]}"
        echo "pytest_add_cli_args ="
        printf '    %s\n' -p no:cacheprovider -q -x -W ignore::RuntimeWarning
    } > "$work/setup.cfg"
    echo "== $target: $module against ${tests[*]} (in $work)"
    (cd "$work" && env -u PYTHONPATH "${env[@]}" nice -n 10 python -m mutmut run --max-children "$children" ${MUTANTS:-} > run.log 2>&1 || true
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
