#!/bin/sh
# scripts/check-doc-links.sh [DIR]: checks every relative markdown link [text](target) in README.md, docs/*.md and bench/*.md:
# the file must exist, and a #fragment must match a heading (GitHub's slug rule).
cd "${1:-.}" || exit 2
fails=$(mktemp); trap 'rm -f "$fails"' EXIT
for f in README.md docs/*.md bench/*.md; do
  dir=$(dirname "$f")
  grep -o '\[[^]]*\]([^)]*)' "$f" | sed 's/.*](\([^)]*\))/\1/' | while read -r t; do
    case "$t" in http*|mailto:*) continue;; esac
    path=${t%%#*}; frag=; case "$t" in *#*) frag=${t#*#};; esac
    if [ -n "$path" ]; then target="$dir/$path"; else target="$f"; fi
    if [ ! -e "$target" ]; then echo "$f: broken link $t"; echo x >> "$fails"; continue; fi
    if [ -n "$frag" ]; then
      if ! grep '^#' "$target" | sed 's/^#* *//' | tr 'A-Z' 'a-z' | sed "s/[^a-z0-9 _-]//g; s/ /-/g" | grep -qx -- "$frag"; then
        echo "$f: no heading #$frag in $target"; echo x >> "$fails"
      fi
    fi
  done
done
[ -s "$fails" ] && exit 1
echo "doc links: all resolve"
