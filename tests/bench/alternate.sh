#!/usr/bin/env bash
# Benchmark: an earlier commit's code against this one's, alternated on one running lab (labctl.py up, in the
# slot of CARGOSHIP_LAB_SLOT, default 5), so that the machine's drift from minute to minute falls on both alike.
#
#     CARGOSHIP_LAB_SLOT=5 tests/bench/alternate.sh c8d9c64 3
#
# Each round, for the earlier commit's plugins/, roles/, playbooks/ and cargoship_runner/ and then this commit's: a dry run, a real
# run with nothing to do, and a real run that drains and restarts every node (the registries' port moves back
# and forth between two inventories), each measured by tests/bench/cpu_of.py. The working tree must be clean;
# it is put back to HEAD at the end, also on failure. The example desired state is in the lab's group_vars.
set -euo pipefail
cd "$(dirname "$0")/../.."
old=${1:?usage: alternate.sh OLD_COMMIT [ROUNDS]}
rounds=${2:-3}
if [ -n "$(git status --porcelain -- plugins roles playbooks cargoship_runner)" ]; then
  echo "alternate.sh: plugins/, roles/, playbooks/ or cargoship_runner/ have uncommitted changes; commit or stash them first" >&2
  exit 2
fi
export CARGOSHIP_LAB_SLOT=${CARGOSHIP_LAB_SLOT:-5} PATH=$PWD/.venv/bin:$PATH
lab=.lab-$CARGOSHIP_LAB_SLOT
[ "$CARGOSHIP_LAB_SLOT" = 0 ] && lab=.lab
here=$lab/inventory.yml
moved=$(mktemp -d)
mkdir -p "$lab/group_vars" "$moved/group_vars"
cp examples/group_vars/all.yml "$lab/group_vars/all.yml"
cp "$here" "$moved/hosts.yml"
sed 's/registry.internal.example:5000/registry.internal.example:5001/' examples/group_vars/all.yml > "$moved/group_vars/all.yml"
use() {
  if [ "$1" = old ]; then
    git checkout -q "$old" -- plugins roles playbooks cargoship_runner
  else
    git checkout -q HEAD -- plugins roles playbooks cargoship_runner && git clean -qfd -- plugins roles playbooks cargoship_runner
  fi
}
trap 'use new; rm -rf "$moved"' EXIT
bench() { .venv/bin/python tests/bench/cpu_of.py -- "$@"; }
# Each version's payloads are kept by the first run of it (their key is the code's): warm both first.
for version in old new; do
  use $version
  cargoship engine-config-sync -i "$here" --confirm > /dev/null 2>&1
  cargoship engine-config-sync -i "$here" --dry-run > /dev/null 2>&1
done
now=$here next=$moved
for round in $(seq "$rounds"); do
  for version in old new; do
    use $version
    echo "$round $version dry run:          $(bench cargoship engine-config-sync -i "$now" --dry-run)"
    echo "$round $version nothing to do:    $(bench cargoship engine-config-sync -i "$now" --confirm)"
    echo "$round $version restart of all:   $(bench cargoship engine-config-sync -i "$next" --confirm)"
    previous=$now now=$next next=$previous
  done
done
use new
cargoship engine-config-sync -i "$here" --confirm > /dev/null
