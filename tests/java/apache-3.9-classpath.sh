#!/usr/bin/env bash
# Prints a Java class path for a real Apache ZooKeeper 3.9 server (Maven Central), usable as
# APACHE_ZK_CLASSPATH for tests/zk-server:
#   APACHE_ZK_CLASSPATH=$(tests/java/apache-3.9-classpath.sh) ZK_KIND=apache mvn -q -B test
# ZK_APACHE_VERSION overrides the version (default 3.9.3). Maven output goes to stderr only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${ZK_APACHE_VERSION:-3.9.3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
mvn -q -B -f "$here/apache-server/pom.xml" -Dzookeeper.version="$version" \
  dependency:build-classpath -Dmdep.outputFile="$out" -Dmdep.includeScope=runtime >&2
# conf/ first so its logback.xml (INFO to the console, i.e. server.log) is picked up.
printf '%s:%s\n' "$here/apache-server/conf" "$(cat "$out")"
