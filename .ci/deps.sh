#!/bin/sh
# Install the Debian packages smrules needs to build and test.  Idempotent:
# skips apt entirely when everything is already there.  Run as root.
set -e
PKGS="build-essential pkg-config git python3 clang libclang-rt-14-dev strace \
liblua5.4-dev libsqlite3-dev libcjson-dev libyaml-dev libprotobuf-c-dev \
protobuf-c-compiler zlib1g-dev libcurl4-openssl-dev libpcre2-dev \
python3-aiosmtpd python3-botocore chromium"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing:$missing"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
