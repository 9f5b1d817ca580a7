#!/bin/sh
# Make sure a ZooKeeper can be launched locally: Debian's zookeeper package and
# a Java runtime, unless the user brings their own. With WITH_CURATOR=1 also
# Curator's jars (recipes, and service discovery with the Jackson it needs) and a JDK
# (javac), for the interoperability tests.
# ZOOKEEPER_VERSION=3.9 / CURATOR_VERSION=5.7 then add Debian 13's jars on top of
# Debian 12's (scripts/fetch-zookeeper.sh); 3.8 and 5.4, the defaults, are Debian 12's.
set -eu
here=$(dirname "$0")
need=""
if [ -n "${ZOOKEEPER_HOME:-}" ]; then
    ls "$ZOOKEEPER_HOME"/lib/*.jar >/dev/null 2>&1 || ls "$ZOOKEEPER_HOME"/*.jar >/dev/null 2>&1 || {
        echo "ZOOKEEPER_HOME=$ZOOKEEPER_HOME holds no ZooKeeper jars" >&2
        exit 1
    }
elif [ ! -f /usr/share/java/zookeeper.jar ]; then
    # Even with AIOCOORD_ZK set, the fault tests launch private servers.
    need="$need zookeeper"
fi
command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] || need="$need default-jre-headless"
if [ "${WITH_CURATOR:-0}" = 1 ]; then
    [ -f /usr/share/java/curator-recipes.jar ] || need="$need libcurator-recipes-java"
    # curator-x-discovery.jar; its package depends on Jackson (databind, core, annotations).
    [ -f /usr/share/java/curator-x-discovery.jar ] || need="$need libcurator-discovery-java"
    command -v javac >/dev/null 2>&1 || need="$need default-jdk-headless"
fi
if [ -z "$need" ]; then
    exec sh "$here/fetch-zookeeper.sh"
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing:$need. Install them, or set ZOOKEEPER_HOME to a ZooKeeper release" >&2
    echo "(and AIOCOORD_ZK to a running ensemble, e.g. docker compose up, see compose.yaml)" >&2
    exit 1
fi
echo "installing Debian packages:$need" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need
exec sh "$here/fetch-zookeeper.sh"
