#!/usr/bin/env bash
# Builds zkc_e2e.c against the Apache ZooKeeper C client (libzookeeper_mt), starts a server through
# tests/zk-server (ZK_KIND, ZK_TOPOLOGY and ZK_ENSEMBLE_MEMBER as for every suite), runs the tests
# against it, stops it, and exits with the tests' status.
#
#   bash tests/c/run.sh                 zoolog (ZOOLOG_BIN or target/release/zoolog)
#   ZK_KIND=apache bash tests/c/run.sh  Debian's Apache ZooKeeper 3.8.0
#
# ZKC_SKIP=name,name skips known failures by name (they print as "skip"); ZKC_BUILD_DIR (default
# tests/c/build) holds the binary; ZK_KEEP_DIRS=1 keeps the server's directory (zoo.cfg, server.log).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build_dir=${ZKC_BUILD_DIR:-$here/build}

if [ ! -f /usr/include/zookeeper/zookeeper.h ]; then
  echo "tests/c: /usr/include/zookeeper/zookeeper.h is missing; install libzookeeper-mt-dev" >&2
  exit 2
fi
mkdir -p "$build_dir"
gcc -std=c11 -O1 -Wall -Wextra -Werror -pthread -o "$build_dir/zkc_e2e" "$here/zkc_e2e.c" -lzookeeper_mt

server_dir=$(mktemp -d "${TMPDIR:-/tmp}/zoolog-c-e2e.XXXXXX")
stop_server() {
  local status=$?
  "$here/../zk-server" stop "$server_dir/zk" >/dev/null 2>&1 || true
  if [ "${ZK_KEEP_DIRS:-0}" = 1 ]; then echo "tests/c: server directory kept in $server_dir" >&2
  else rm -rf "$server_dir"; fi
  exit "$status"
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The container and TTL tests need extended types and a reaper that runs every second.
port=$("$here/../zk-server" start "$server_dir/zk" \
  -Dzookeeper.extendedTypesEnabled=true -Dznode.container.checkIntervalMs=1000)

# Under an ensemble the program also gets every member, to move a session between two of them.
members=()
if [ "${ZK_TOPOLOGY:-standalone}" = ensemble ]; then
  members=("$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["connect"])' \
    "$server_dir/zk/member.json")")
fi
echo "tests/c: ${ZK_KIND:-zoolog} (${ZK_TOPOLOGY:-standalone}) on 127.0.0.1:$port"
"$build_dir/zkc_e2e" "127.0.0.1:$port" "${members[@]}"
