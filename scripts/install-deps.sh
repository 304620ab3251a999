#!/usr/bin/env bash
# Installs the Debian packages the test suite drives, only those missing:
#   kcat                      librdkafka's CLI (interop: kcat -L)
#   zookeeper + a headless JRE the real ZooKeeper of zk-legacy mode
# Go modules are fetched by `go mod download` in the Makefile.
set -euo pipefail

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
[[ -f /usr/share/java/zookeeper.jar ]] || missing+=(zookeeper)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)

if ((${#missing[@]} == 0)); then
	exit 0
fi
echo "installing Debian packages: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# apt-get update only when a package is not known to the local index.
if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
	$sudo apt-get update -qq
fi
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
