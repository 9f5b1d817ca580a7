#!/bin/sh
# Make sure a ZooKeeper can be launched locally: Debian's zookeeper package
# (and a Java runtime) unless the user brings their own.
set -eu
if [ -n "${AIOCOORD_ZK:-}" ]; then
    exit 0  # an external ensemble: nothing to launch
fi
if [ -n "${ZOOKEEPER_HOME:-}" ]; then
    ls "$ZOOKEEPER_HOME"/lib/*.jar >/dev/null 2>&1 || ls "$ZOOKEEPER_HOME"/*.jar >/dev/null 2>&1 || {
        echo "ZOOKEEPER_HOME=$ZOOKEEPER_HOME holds no ZooKeeper jars" >&2
        exit 1
    }
    exit 0
fi
need=""
[ -f /usr/share/java/zookeeper.jar ] || need="$need zookeeper"
command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] || need="$need default-jre-headless"
[ -n "$need" ] || exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ZooKeeper jars not found: set ZOOKEEPER_HOME to a ZooKeeper release," >&2
    echo "or AIOCOORD_ZK to a running ensemble (e.g. docker compose up, see compose.yaml)" >&2
    exit 1
fi
echo "installing Debian packages:$need" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need
