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
#   node.jsa                 AppCDS archive from one training start (optional: the node starts ~30-40 %
#                            faster with it; tests/helpers/opensearch_node.py uses it when present)
#   BUILD_KEY                hash of pom.xml + src/ (+ this layout's version); written last
# Maven's local repository stays at its default (~/.m2), so a rebuild downloads nothing new.
# Env: KI_CACHE_DIR, MVN (default mvn), KI_MVN_ARGS (extra Maven arguments, e.g. -o),
#      KI_OPENSEARCH_CDS=0 (skip the CDS training start).
# tests/helpers/opensearch_node.py starts the node from this cache (or from $KI_OPENSEARCH_HOME).
# Notes: docs/opensearch-node.md.
set -euo pipefail

OPENSEARCH_VERSION=2.19.1
LAYOUT=2 # bump when the cache layout below changes

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
project="$(cd "$here/../opensearch-node" && pwd)"
cache="${KI_CACHE_DIR:-$HOME/.cache/ki}/opensearch/$OPENSEARCH_VERSION"

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
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
dep_lines="$(tr ':' '\n' <<<"$deps")"
mkdir -p "$staging/out/knn"
for j in "$knn_src"/*.jar; do
  name="$(basename "$j")"
  artifact="$(sed -E 's/-[0-9][^-]*(-[a-z]+)?\.jar$//' <<<"$name")"
  if grep -q "/$artifact-[0-9][^/]*\.jar$" <<<"$dep_lines"; then
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
log "built in $(( $(date +%s) - start ))s: $(tr ':' '\n' <"$cache/classpath.txt" | wc -l) classpath entries"

# AppCDS: start the node once with -XX:ArchiveClassesAtExit, touch index/bulk/knn/search code paths, stop
# it (stdin EOF -> System.exit -> the JVM writes the archive). The archive is only valid for this
# classpath and JDK; with another the JVM warns and starts without it. Failure here is not fatal.
train_cds() {
  local train="$staging/train" pid port i rc=0
  mkdir -p "$train"
  mkfifo "$train/stdin"
  # Same heap and GC flags as tests/helpers/opensearch_node.py (CDS needs matching GC / compressed-oops mode).
  java -Xms512m -Xmx1g -XX:+UseG1GC -Djava.locale.providers=SPI,COMPAT -Dlog4j.shutdownHookEnabled=false \
    -XX:ArchiveClassesAtExit="$cache/node.jsa.tmp" -cp "$(cat "$cache/classpath.txt")" ki.search.KiOpenSearchNode \
    --home "$train/home" --ports-file "$train/http.port" --exit-on-stdin-eof <"$train/stdin" >"$train/node.log" 2>&1 &
  pid=$!
  exec 7>"$train/stdin"
  for ((i = 0; i < 600; i++)); do
    [[ -s $train/http.port ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  port="$(cat "$train/http.port" 2>/dev/null || true)"
  if [[ -z $port ]]; then
    log "CDS training start failed (see below); continuing without node.jsa"
    tail -n 20 "$train/node.log" >&2
    rc=1
  elif command -v curl >/dev/null; then
    local u="http://127.0.0.1:$port" j=(-s -o /dev/null -H 'Content-Type: application/json')
    curl "${j[@]}" "$u/_cluster/health?wait_for_status=green&timeout=30s"
    curl "${j[@]}" -X PUT "$u/train" -d '{"settings":{"index.knn":true,"number_of_replicas":0},"mappings":{"dynamic":"strict","properties":{"t":{"type":"text","analyzer":"english","fields":{"de":{"type":"text","analyzer":"german"}}},"p":{"type":"keyword"},"e":{"type":"knn_vector","dimension":2,"method":{"name":"hnsw","engine":"lucene","space_type":"cosinesimil"}}}}}'
    printf '%s\n' '{"index":{"_id":"1"}}' '{"t":"motions dismissed","p":"a","e":[1,0]}' '{"index":{"_id":"2"}}' '{"t":"Verträge","p":"b","e":[0,1]}' |
      curl "${j[@]}" -X POST "$u/train/_bulk?refresh=true" -H 'Content-Type: application/x-ndjson' --data-binary @-
    curl "${j[@]}" -X POST "$u/train/_flush"
    curl "${j[@]}" "$u/train/_search" -d '{"query":{"knn":{"e":{"vector":[1,0],"k":1,"filter":{"terms":{"p":["a"]}}}}}}'
    curl "${j[@]}" "$u/train/_search" -d '{"query":{"match":{"t":"motion"}}}'
    curl "${j[@]}" -X POST "$u/train/_delete_by_query?refresh=true" -d '{"query":{"term":{"p":"b"}}}'
  fi
  exec 7>&-
  for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
    rc=1
  fi
  wait "$pid" 2>/dev/null || true
  if [[ $rc == 0 && -s $cache/node.jsa.tmp ]]; then
    mv -f "$cache/node.jsa.tmp" "$cache/node.jsa"
    log "CDS archive written ($(du -m "$cache/node.jsa" | cut -f1) MB)"
  else
    rm -f "$cache/node.jsa.tmp"
    log "no CDS archive (node starts without it)"
  fi
}
rm -f "$cache/node.jsa"
if [[ ${KI_OPENSEARCH_CDS:-1} != 0 ]]; then
  t_cds=$(date +%s)
  train_cds || log "CDS training failed; continuing without node.jsa"
  log "CDS training took $(( $(date +%s) - t_cds ))s"
fi

echo "$key" >"$cache/BUILD_KEY"
echo "$cache"
