#!/usr/bin/env bash
# Build (once) the in-process OpenSearch 2.19.1 test node (opensearch-node/, Maven, Java 17) into a cache
# outside the repo and print the cache directory on stdout. Idempotent: does nothing when the cache was
# built from the same opensearch-node/pom.xml + src/ and every classpath entry still exists.
#
#   bash .ci/install_opensearch.sh            # build if needed, print the cache dir
#   bash .ci/install_opensearch.sh --force    # rebuild
#
# Cache: ${KI_CACHE_DIR:-$HOME/.cache/ki}/opensearch/2.19.1/
#   ki-opensearch-node.jar   the launcher (ki.search.KiOpenSearchNode)
#   knn/*.jar                jars unpacked from org.opensearch.plugin:opensearch-knn:2.19.1.0 (zip)
#   classpath.txt            one line: launcher jar, Maven dependency jars (in ~/.m2), knn jars
#   BUILD_KEY                hash of pom.xml + src/ (+ this layout's version); written last
# Maven's local repository stays at its default (~/.m2), so a rebuild downloads nothing new.
# Env: KI_CACHE_DIR, MVN (default mvn), KI_MVN_ARGS (extra Maven arguments, e.g. -o).
# tests/opensearch_node.py starts the node from this cache (or from $KI_OPENSEARCH_HOME).
# Notes: docs/opensearch-node.md.
set -euo pipefail

OPENSEARCH_VERSION=2.19.1
LAYOUT=1 # bump when the cache layout below changes

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
project="$(cd "$here/../opensearch-node" && pwd)"
cache="${KI_CACHE_DIR:-$HOME/.cache/ki}/opensearch/$OPENSEARCH_VERSION"

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "install_opensearch.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

log() { echo "install_opensearch: $*" >&2; }

build_key() {
  # Content hash of the pom and every source/resource file (paths included), sorted for stability.
  (
    cd "$project"
    echo "layout=$LAYOUT version=$OPENSEARCH_VERSION"
    find pom.xml src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  ) | sha256sum | cut -c1-32
}

cache_ok() {
  [[ -f $cache/BUILD_KEY && -f $cache/classpath.txt && -f $cache/ki-opensearch-node.jar ]] || return 1
  [[ "$(cat "$cache/BUILD_KEY")" == "$key" ]] || return 1
  local entry
  local -a entries
  IFS=: read -r -a entries <"$cache/classpath.txt"
  for entry in "${entries[@]}"; do
    [[ -f $entry ]] || { log "classpath entry missing: $entry"; return 1; }
  done
}

key="$(build_key)"
if [[ $force == 0 ]] && cache_ok; then
  echo "$cache"
  exit 0
fi

mkdir -p "$cache"
# Serialise concurrent installers (parallel CI jobs share the cache).
exec 9>"$cache/.install.lock"
command -v flock >/dev/null && flock 9
if [[ $force == 0 ]] && cache_ok; then
  echo "$cache"
  exit 0
fi

mvn_bin="${MVN:-mvn}"
if ! command -v "$mvn_bin" >/dev/null; then
  log "Maven ($mvn_bin) not found; apt-get install maven (needs Java 17: openjdk-17-jdk-headless)"
  exit 3
fi
java_major="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
if [[ -z $java_major ]] || (( java_major < 17 )); then
  log "java on PATH is '${java_major:-missing}'; the node needs Java 17 (OpenSearch 2.19: 11-21 work, 17 is tested)"
  exit 3
fi

staging="$(mktemp -d "$cache/build.tmp.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
log "building the OpenSearch $OPENSEARCH_VERSION test node with Maven (first build downloads ~90 MB into ~/.m2)"
start=$(date +%s)
# shellcheck disable=SC2086 # KI_MVN_ARGS is a word list on purpose
"$mvn_bin" -B -q -Dstyle.color=never -f "$project/pom.xml" ${KI_MVN_ARGS:-} -Dki.buildDir="$staging/target" \
  package dependency:build-classpath -Dmdep.outputFile="$staging/deps.txt" -Dmdep.includeScope=runtime >&2

jar="$(ls "$staging"/target/ki-opensearch-node-*.jar)"
[[ -s $staging/deps.txt ]] || { log "mvn dependency:build-classpath wrote no classpath"; exit 1; }
knn_src="$staging/target/knn"
ls "$knn_src"/opensearch-knn-*.jar >/dev/null || { log "k-NN zip not unpacked into $knn_src"; exit 1; }

# Classpath plugins skip jar-hell checks, so a duplicate artifact would shadow silently: drop any jar of the
# k-NN zip whose artifact (file name without version) is already a Maven dependency.
deps="$(cat "$staging/deps.txt")"
mkdir -p "$staging/out/knn"
for j in "$knn_src"/*.jar; do
  name="$(basename "$j")"
  artifact="$(echo "$name" | sed -E 's/-[0-9][^-]*(-[a-z]+)?\.jar$//')"
  if echo ":$deps" | tr ':' '\n' | grep -q "/$artifact-[0-9][^/]*\.jar$"; then
    log "skipping $name from the k-NN zip: $artifact is already on the Maven classpath"
    continue
  fi
  cp "$j" "$staging/out/knn/"
done
cp "$jar" "$staging/out/ki-opensearch-node.jar"

# Replace the cache contents; classpath.txt and BUILD_KEY last, so a half-written cache is never "ok".
rm -f "$cache/BUILD_KEY" "$cache/classpath.txt"
rm -rf "$cache/knn"
mv "$staging/out/knn" "$cache/knn"
mv -f "$staging/out/ki-opensearch-node.jar" "$cache/ki-opensearch-node.jar"
{
  printf '%s' "$cache/ki-opensearch-node.jar:$deps"
  for j in "$cache"/knn/*.jar; do printf ':%s' "$j"; done
  echo
} >"$cache/classpath.txt.tmp"
mv -f "$cache/classpath.txt.tmp" "$cache/classpath.txt"
echo "$key" >"$cache/BUILD_KEY"
log "built in $(( $(date +%s) - start ))s: $(tr ':' '\n' <"$cache/classpath.txt" | wc -l) classpath entries"
echo "$cache"
