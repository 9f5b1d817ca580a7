#!/bin/sh
# Fetch the ZooKeeper and Curator jars that Debian 12 does not ship, from Debian 13
# (trixie), into the project's own cache (.cache/jars, gitignored):
#   ZOOKEEPER_VERSION=3.9  libzookeeper-java 3.9.3 (server and Java client)
#   CURATOR_VERSION=5.7    libcurator-{client,framework,recipes,discovery}-java 5.7.1 (+ ZooKeeper
#                          3.9.3, the client Curator 5.7 is built against)
# 3.8 and 5.4 (the defaults) are Debian 12's own packages: nothing to fetch.
#
# The system's apt sources are never changed: apt reads a private sources list (the system's
# own Debian archive, suite trixie) and keeps its lists and caches under the cache directory;
# `apt-get download` fetches by name and `dpkg-deb -x` unpacks into the cache. Fetching needs
# no root. Cached: once the jars are there, nothing is fetched again.
#
# The jars' own dependencies (netty, slf4j, jackson, guava, commons, jetty, ...) are Debian
# 12's, from the system's zookeeper, libcurator-recipes-java and libcurator-discovery-java
# packages (scripts/ensure-zookeeper.sh installs them): 3.9.3's and 5.7.1's manifests name
# the same jars as 3.8.0's and 5.4.0's, and those are built for the machine's Java. So
# curator-x-discovery 5.7.1 runs on Debian 12's Jackson 2.14: it calls only ObjectMapper's
# long-standing API (checked with javap, and by the interop tests). This script checks that
# every jar the fetched manifests name is there.
#
# Usage: ZOOKEEPER_VERSION=3.9 CURATOR_VERSION=5.7 sh scripts/fetch-zookeeper.sh
# Env: AIOCOORD_JAR_CACHE (default: <checkout>/.cache/jars), DEBIAN_MIRROR (default: the
# Debian archive the system's apt sources name), python3 reads the jar manifests.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${AIOCOORD_JAR_CACHE:-$root/.cache/jars}
PYTHON=python3
ZK_FULL=3.9.3
CURATOR_FULL=5.7.1

zk=""
curator=""
case "${ZOOKEEPER_VERSION:-}" in
    "" | 3.8 | 3.8.0) ;;
    3.9 | "$ZK_FULL") zk=$ZK_FULL ;;
    *)
        echo "ZOOKEEPER_VERSION=$ZOOKEEPER_VERSION: this project tests 3.8 (Debian 12's" \
            "package) and 3.9 (Debian 13's $ZK_FULL); for another, set ZOOKEEPER_HOME to an" \
            "unpacked Apache ZooKeeper release" >&2
        exit 1
        ;;
esac
case "${CURATOR_VERSION:-}" in
    "" | 5.4 | 5.4.0) ;;
    5.7 | "$CURATOR_FULL") curator=$CURATOR_FULL zk=$ZK_FULL ;;
    *)
        echo "CURATOR_VERSION=$CURATOR_VERSION: this project tests 5.4 (Debian 12's" \
            "package) and 5.7 (Debian 13's $CURATOR_FULL)" >&2
        exit 1
        ;;
esac
[ -n "$zk" ] || exit 0

java_dir=$cache/root/usr/share/java
want="zookeeper-$zk.jar zookeeper-jute-$zk.jar"
packages="libzookeeper-java"
if [ -n "$curator" ]; then
    want="$want curator-client-$curator.jar curator-framework-$curator.jar"
    want="$want curator-recipes-$curator.jar curator-x-discovery-$curator.jar"
    packages="$packages libcurator-client-java libcurator-framework-java libcurator-recipes-java"
    packages="$packages libcurator-discovery-java"
fi

have_all() {
    for jar in $want; do [ -f "$java_dir/$jar" ] || return 1; done
}

mkdir -p "$cache"
# Two makes at once fetch once: the second waits here, then finds the jars.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.lock"
    flock 9
fi

if ! have_all; then
    mirror=${DEBIAN_MIRROR:-}
    if [ -z "$mirror" ]; then
        codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
        # The archive that serves this release's main component (not -security/-updates).
        mirror=$(apt-get indextargets --format '$(RELEASE) $(COMPONENT) $(REPO_URI)' 2>/dev/null |
            awk -v suite="$codename" '$1 == suite && $2 == "main" { print $3; exit }')
    fi
    if [ -z "$mirror" ]; then
        echo "no Debian archive found in the system's apt sources; set DEBIAN_MIRROR to one" \
            "(its URL, as in a sources.list line)" >&2
        exit 1
    fi
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    state=$cache/apt
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/preferences.d"
    echo "deb [signed-by=$keyring] $mirror trixie main" >"$state/sources.list"
    set -- -o "Dir::Etc::sourcelist=$state/sources.list" -o "Dir::Etc::sourceparts=-" \
        -o "Dir::Etc::preferences=$state/preferences" \
        -o "Dir::Etc::preferencesparts=$state/preferences.d" \
        -o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache"
    # As root apt downloads as the _apt user, who cannot write to this cache.
    [ "$(id -u)" -ne 0 ] || set -- "$@" -o "APT::Sandbox::User=root"
    echo "fetching Debian 13's $packages into $cache" >&2
    apt-get "$@" -qq update
    debs=$cache/debs
    rm -rf "$debs" "$cache/staging"
    mkdir -p "$debs" "$cache/staging"
    (cd "$debs" && apt-get "$@" -qq download $packages)
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$cache/staging"; done
    for jar in $want; do
        [ -f "$cache/staging/usr/share/java/$jar" ] || {
            echo "Debian 13's archive no longer has $jar (fetched: $(ls "$debs"))" >&2
            exit 1
        }
    done
    mkdir -p "$cache/root"
    cp -a "$cache/staging/." "$cache/root/"
    rm -rf "$cache/staging" "$debs" "$state"
fi

# Every jar the fetched manifests' Class-Path names must be there (Debian 12's), except
# the ones this cache replaces and jline (only ZooKeeper's interactive shell uses it).
missing=$(
    cd "$java_dir" && "$PYTHON" - $want <<'EOF'
import os
import sys
import zipfile

ours = {"zookeeper.jar", "zookeeper-jute.jar", "curator-client.jar", "curator-framework.jar",
        "curator-recipes.jar", "curator-x-discovery.jar", "jline.jar"}
missing = set()
for jar in sys.argv[1:]:
    with zipfile.ZipFile(jar) as archive:
        text = archive.read("META-INF/MANIFEST.MF").decode()
    lines = text.replace("\r\n", "\n").replace("\n ", "").splitlines()
    for line in lines:
        if line.startswith("Class-Path:"):
            for path in line.split(":", 1)[1].split():
                if os.path.basename(path) not in ours and not os.path.exists(path):
                    missing.add(path)
print(" ".join(sorted(missing)))
EOF
)
if [ -n "$missing" ]; then
    echo "jars that ZooKeeper $zk${curator:+ / Curator $curator} needs are missing:" \
        "$missing; run scripts/ensure-zookeeper.sh (with WITH_CURATOR=1 for Curator)," \
        "which installs Debian 12's zookeeper, libcurator-recipes-java and" \
        "libcurator-discovery-java" >&2
    exit 1
fi
