#!/bin/sh
# Starts beacon in a container. With arguments, they are beacon's own (e.g. `--config
# /etc/beacon/beacon.json`). Without, a lone beacon whose identity is the container's address
# (a beacon's address must be one its peers reach, never 0.0.0.0), its data in
# /var/lib/beacon and its admin API on every interface.
set -eu
if [ "$#" -gt 0 ]; then
    exec beacon "$@"
fi
ip="${BEACON_IP:-$(hostname -i | cut -d' ' -f1)}"
exec beacon --listen "$ip:16000" --admin "0.0.0.0:16088" --data-dir /var/lib/beacon/data
