#!/usr/bin/env bash
# Installs the Debian packages the test suite drives, only those missing:
#   kcat                      librdkafka's CLI (interop: kcat -L)
#   python3-kafka             kafka-python (interop: KafkaAdminClient scenario)
#   tshark                    Wireshark's Kafka dissector (interop: wire check)
#   zookeeper + a headless JRE the real ZooKeeper of zk-legacy mode
# Go modules are fetched by `go mod download` in the Makefile.
set -euo pipefail

# Debian's python3-kafka lands in the system interpreter's dist-packages, so
# check with /usr/bin/python3 (a pyenv or venv python3 on PATH would not see it).
syspython=/usr/bin/python3
[[ -x $syspython ]] || syspython=python3

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
"$syspython" -c 'import kafka' >/dev/null 2>&1 || missing+=(python3-kafka)
command -v tshark >/dev/null 2>&1 || missing+=(tshark)
[[ -f /usr/share/java/zookeeper.jar ]] || missing+=(zookeeper)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)

if ((${#missing[@]} == 0)); then
	exit 0
fi
echo "installing Debian packages: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# wireshark-common asks whether non-root users may capture; answer it up front
# (no: the interop wire check runs as root or skips).
if [[ " ${missing[*]} " == *" tshark "* ]]; then
	echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections
fi
# apt-get update first when a package is not known to the local index, and once
# more if the install fails (a stale index names versions the mirror dropped).
if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
	$sudo apt-get update -qq
fi
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
