#!/bin/sh
# Install the Debian packages smrules needs.  Idempotent: skips apt
# entirely when everything is already there.  Run as root (or with sudo).
#
#   sh .ci/deps.sh          build and test packages (CI)
#   sh .ci/deps.sh build    only what building smrules needs (the demo)
#   sh .ci/deps.sh test     only what the tests need on top of that
set -e
BUILD_PKGS="build-essential pkg-config liblua5.4-dev libsqlite3-dev \
libcjson-dev libyaml-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev \
libcurl4-openssl-dev libpcre2-dev"
TEST_PKGS="git python3 clang libclang-rt-14-dev strace python3-aiosmtpd \
python3-dev python3-numpy python3-setuptools python3-torch \
python3-botocore chromium man-db prometheus prometheus-alertmanager"
case "${1:-all}" in
  build) PKGS=$BUILD_PKGS ;;
  test) PKGS=$TEST_PKGS ;;
  all) PKGS="$BUILD_PKGS $TEST_PKGS" ;;
  *)
    echo "usage: sh .ci/deps.sh [build|test|all]" >&2
    exit 2
    ;;
esac
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
