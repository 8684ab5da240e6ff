#!/usr/bin/env bash
# Installs the Debian packages hap builds against (Z3 and CBC for the solver bindings under solve/, and
# g++ for the one C++ file there, milp/cbc/clpwall.cc), and Debian's PyTorch and torchvision (torch 1.13,
# into /usr/bin/python3) for hap import's tests: the exporter traces real torch modules there
# when they are missing. As root it runs apt-get itself; otherwise it prints the exact command and fails.
set -euo pipefail
pkgs=(libz3-dev coinor-libcbc-dev pkg-config g++ python3-torch python3-torchvision)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") >&2
else
  echo "setup: missing Debian packages ${missing[*]}; run as root:" >&2
  echo "  sudo sh -c '$cmd'" >&2
  exit 1
fi
