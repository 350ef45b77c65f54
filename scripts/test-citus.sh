#!/usr/bin/env bash
# `npm run test:citus [vitest args]`: the Citus subset of the suite on a three-node cluster this script starts
# (a coordinator and two workers, ../shared/citus/cluster.sh), stopped again when the run ends.
# Which files run and why: docs/decisions/citus.md. Extra arguments go to vitest (e.g. one test file).
# Without Citus installed (../shared/citus/build.sh), it says so and succeeds without running anything.
set -euo pipefail
cd "$(dirname "$0")/.."

# The cluster scripts sit beside the checkout (../shared/citus; a worktree under wt/ finds them one level higher).
citus_dir=${CITUS_DIR:-}
if [ -z "$citus_dir" ]; then
  for candidate in ../shared/citus ../../shared/citus; do
    if [ -x "$candidate/cluster.sh" ]; then citus_dir=$candidate; break; fi
  done
fi
pg_bin=/usr/lib/postgresql/15/bin
if [ -z "$citus_dir" ] || [ ! -x "$citus_dir/cluster.sh" ] || [ ! -f "$("$pg_bin/pg_config" --pkglibdir 2>/dev/null)/citus.so" ]; then
  echo "test:citus: skipped, Citus is not installed (no ../shared/citus/cluster.sh, or no citus.so: run ../shared/citus/build.sh)"
  exit 0
fi

# Outside the checkout: the nodes run as the postgres user, which may not traverse a 0700 home directory.
cluster=${CITUS_CLUSTER_DIR:-/tmp/wds-citus-test-$(id -u)}
port=${CITUS_PORT:-56442}
"$citus_dir/cluster.sh" stop "$cluster" >/dev/null 2>&1 || true
"$citus_dir/cluster.sh" start "$cluster" "$port" >/dev/null
trap '"$citus_dir/cluster.sh" stop "$cluster"' EXIT

export TEST_DATABASE_URL="postgresql://postgres@127.0.0.1:$port/postgres"
export TEST_CITUS_WORKERS="127.0.0.1:$((port + 1)),127.0.0.1:$((port + 2))"
unset DATABASE_URL

if [ "$#" -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(grep -v '^\s*\(#\|$\)' test/citus-suite.txt)
fi
npx vitest run --maxWorkers="${CITUS_TEST_WORKERS:-2}" --testTimeout=120000 "${files[@]}"
