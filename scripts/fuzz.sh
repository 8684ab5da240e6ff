#!/usr/bin/env bash
# Runs every fuzz target in the module for a bounded time each (FUZZTIME,
# default 10s), so parsers stay panic-free in CI. Corpus entries a run finds
# land in the package's testdata/fuzz and should be committed as regressions.
set -euo pipefail
fuzztime=${FUZZTIME:-10s}
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target ($fuzztime)" >&2
    go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 1 >/dev/null
  done
done
