#!/bin/sh
# Create the project's virtualenv and install aiocoord with its dev tools.
# On a bare Debian the interpreter may lack venv/ensurepip: install it then.
set -eu
VENV=${1:-.venv}
PYTHON=${PYTHON:-python3}

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
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[dev]'
