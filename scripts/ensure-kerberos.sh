#!/bin/sh
# Make sure the Kerberos tests can run: MIT Kerberos' KDC and admin tools (the test kit's
# KerberosKDC runs krb5kdc, kdb5_util and kadmin.local in a temp dir of its own; kinit and
# klist come with krb5-user) and what pip needs to build the `gssapi` package, which has
# no Linux wheels on PyPI: krb5-config and the headers (libkrb5-dev) and a C compiler.
# Installing krb5-kdc may start a system KDC service where an init system runs; the tests
# never use it, nor the system's /etc/krb5.conf.
set -eu
need=""
command -v krb5kdc >/dev/null 2>&1 || [ -x /usr/sbin/krb5kdc ] || need="$need krb5-kdc"
command -v kadmin.local >/dev/null 2>&1 || [ -x /usr/sbin/kadmin.local ] || need="$need krb5-admin-server"
command -v kinit >/dev/null 2>&1 || need="$need krb5-user"
command -v krb5-config >/dev/null 2>&1 || need="$need libkrb5-dev"
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || need="$need gcc libc6-dev"
[ -z "$need" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing:$need (MIT Kerberos: a KDC, kadmin.local, kinit, krb5-config)." >&2
    echo "Install them with your system's package manager." >&2
    exit 1
fi
echo "installing Debian packages:$need" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
# krb5-config's debconf questions (the default realm, its KDCs) get their defaults.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need
