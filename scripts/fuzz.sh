#!/usr/bin/env bash
# Runs every fuzz target in the module for a bounded time each (FUZZTIME,
# default 10s), so parsers stay panic-free in CI. Corpus entries a run finds
# land in the package's testdata/fuzz and should be committed as regressions.
#
# A failing target prints the fuzzer's whole output. Go's fuzzer sometimes
# reports "fuzzing process hung or terminated unexpectedly" when no input is
# at fault: its worker is killed if one call runs past a fixed 10 s, which a
# loaded CI machine can reach while minimizing (golang/go#56238, #52569). So
# such a report is checked: the input it wrote is replayed as an ordinary
# test under a time limit. If the replay passes quickly, the report was the
# fuzzer's and the target is run once more; if the replay fails or is slow,
# the input is a real hang and the script fails with it kept on disk.
set -euo pipefail
fuzztime=${FUZZTIME:-10s}
# replaylimit bounds the replay of a reported hang: a parser must take
# milliseconds on a fuzz-sized input, so 30 s is a hang however loaded the
# machine is.
replaylimit=30s

# fuzz_once PKG TARGET LOG: one bounded fuzz run, output in LOG.
fuzz_once() {
  go test "$1" -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" \
    -fuzzminimizetime 3s -parallel 1 >"$3" 2>&1
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target ($fuzztime)" >&2
    if fuzz_once "$pkg" "$target" "$log"; then
      continue
    fi
    input=$(sed -n 's|.*Failing input written to \(testdata/fuzz/[^ ]*\).*|\1|p' "$log" | head -n 1)
    if grep -q 'fuzzing process hung or terminated unexpectedly' "$log" && [ -n "$input" ]; then
      dir=$(go list -f '{{.Dir}}' "$pkg")
      if timeout "$replaylimit" go test "$pkg" -run "^$target/$(basename "$input")\$" >/dev/null 2>&1; then
        echo "fuzz: $pkg $target: the fuzzer reported a hang, but its input $input replays in time; treated as Go's spurious report and run again" >&2
        rm -f "$dir/$input"
        if fuzz_once "$pkg" "$target" "$log"; then
          continue
        fi
      fi
    fi
    echo "fuzz: $pkg $target FAILED:" >&2
    cat "$log" >&2
    exit 1
  done
done
