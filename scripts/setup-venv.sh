#!/bin/sh
# Create the project's virtualenv and install aiocoord with its dev tools.
# On a bare Debian the interpreter may lack venv/ensurepip: install it then.
set -eu
VENV=${1:-.venv}
PYTHON=${PYTHON:-python3}

# PYTHON=python3.13 where pyenv has 3.13 but does not select it (its shim then says
# "command not found"): take pyenv's own build of that version.
if ! "$PYTHON" -c '' 2>/dev/null && command -v pyenv >/dev/null 2>&1; then
    minor=$(basename "$PYTHON" | sed -n 's/^python\([0-9]*\.[0-9]*\)$/\1/p')
    for candidate in "$(pyenv root)/versions/$minor".*/bin/"python$minor"; do
        if [ -x "$candidate" ]; then PYTHON=$candidate; fi
    done
fi
"$PYTHON" -c '' 2>/dev/null || {
    echo "no $PYTHON here: install it, or pass another PYTHON= to make" >&2
    exit 1
}
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "aiocoord needs Python >= 3.11; $PYTHON is $("$PYTHON" --version 2>&1)" >&2
    exit 1
}
if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    pkg="python3-venv"
    ver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    echo "installing Debian's python$ver-venv (needed to create $VENV)" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "python$ver-venv" || \
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$pkg"
fi
# A virtualenv belongs to one interpreter: one made by another Python is made again.
version='import sys; print("%d.%d" % sys.version_info[:2])'
if [ -x "$VENV/bin/python" ] &&
    [ "$("$VENV/bin/python" -c "$version")" != "$("$PYTHON" -c "$version")" ]; then
    echo "$VENV was made by another Python than $PYTHON: making it again" >&2
    rm -rf "$VENV"
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[dev]'
