#!/usr/bin/env bash
# The memory workloads (putget, push, tiny:3/4/12/16/mixed, churn) under specalloc, the system
# allocator, mimalloc and jemalloc as the global allocator. Each allocator's worker is built in
# its own target directory (no feature unification across configurations); rounds are
# interleaved (each workload runs under every allocator in turn) and medians are reported:
# wall time, peak RSS (getrusage), and the workload's own figure (tiny: resident bytes per
# object; churn: resident bytes after the drop).
#
#   bench/scripts/memory.sh [rounds]      (needs cmake only if snmalloc is added)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
allocs=(specalloc system mimalloc jemalloc)
declare -A feat=([specalloc]="" [system]="global-system" [mimalloc]="global-mimalloc" [jemalloc]="global-jemalloc")
workloads=(putget push tiny:3 tiny:4 tiny:12 tiny:16 tiny:mixed churn)
for a in "${allocs[@]}"; do
    f=${feat[$a]}
    cargo build -q --release -p specalloc-bench --bin memory_worker \
        --target-dir "target/memory/$a" ${f:+--features "$f"} >&2
done
out=target/memory/samples.csv
mkdir -p target/memory
: > "$out"
for r in $(seq 1 "$rounds"); do
    for w in "${workloads[@]}"; do
        for a in "${allocs[@]}"; do
            "target/memory/$a/release/memory_worker" "$w" 2>/dev/null >> "$out"
        done
    done
    echo "round $r/$rounds done" >&2
done
echo "samples: $out" >&2
awk -F, '
function median(arr, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
    return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
{ k = $1 SUBSEP $2; n[k]++; wall[k, n[k]] = $3; rss[k, n[k]] = $4; ex[k, n[k]] = $6; name[$1] = $5; seen[$1] = 1; al[$2] = 1 }
END {
    printf "%-10s %-10s %12s %14s %22s\n", "workload", "allocator", "wall ms", "peak RSS KiB", "extra (median)"
    split("putget push tiny:3 tiny:4 tiny:12 tiny:16 tiny:mixed churn", W, " ")
    split("specalloc system mimalloc jemalloc", A, " ")
    for (wi = 1; wi <= 7; wi++) for (ai = 1; ai <= 4; ai++) {
        k = W[wi] SUBSEP A[ai]; m = n[k]; if (!m) continue
        for (i = 1; i <= m; i++) { a1[i] = wall[k, i]; a2[i] = rss[k, i]; a3[i] = ex[k, i] }
        printf "%-10s %-10s %12.1f %14d %14.3f %s\n", W[wi], A[ai], median(a1, m), median(a2, m), median(a3, m), name[W[wi]]
    }
}' "$out"
