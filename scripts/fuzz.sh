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
#
# Go 1.26's fuzz coordinator has a second false alarm: when -fuzztime runs
# out it can fail the target with a bare "context deadline exceeded" and no
# input written, a race between the deadline and its workers' contexts
# (golang/go#75804, fixed in Go 1.27). A failure that wrote no input and
# names that error is therefore checked too: the target's corpus is replayed
# as an ordinary test, and if it passes the target is fuzzed once more.
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

# spurious PKG TARGET LOG: succeeds when the failed run logged in LOG is one
# of the fuzzer's own false alarms described above (removing the innocent
# input a false hang report wrote), fails when it may be a real finding.
spurious() {
  local input dir
  input=$(sed -n 's|.*Failing input written to \(testdata/fuzz/[^ ]*\).*|\1|p' "$3" | head -n 1)
  if [ -z "$input" ] && grep -q '^    context deadline exceeded$' "$3"; then
    if go test "$1" -run "^$2\$" >/dev/null 2>&1; then
      echo "fuzz: $1 $2: the fuzzer failed at its deadline with no input written, and the corpus replays clean; treated as Go's coordinator race (golang/go#75804) and run again" >&2
      return 0
    fi
    return 1
  fi
  if [ -n "$input" ] && grep -q 'fuzzing process hung or terminated unexpectedly' "$3"; then
    dir=$(go list -f '{{.Dir}}' "$1")
    if timeout "$replaylimit" go test "$1" -run "^$2/$(basename "$input")\$" >/dev/null 2>&1; then
      echo "fuzz: $1 $2: the fuzzer reported a hang, but its input $input replays in time; treated as Go's spurious report and run again" >&2
      rm -f "$dir/$input"
      return 0
    fi
  fi
  return 1
}

# attempts bounds the runs of one target: a false alarm is rare, so two in
# a row are tolerated and a third failure fails the script.
attempts=3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target ($fuzztime)" >&2
    ok=false
    for ((run = 1; run <= attempts; run++)); do
      if fuzz_once "$pkg" "$target" "$log"; then
        ok=true
        break
      fi
      if [ "$run" -eq "$attempts" ] || ! spurious "$pkg" "$target" "$log"; then
        break
      fi
    done
    if ! $ok; then
      echo "fuzz: $pkg $target FAILED:" >&2
      cat "$log" >&2
      exit 1
    fi
  done
done
