#!/usr/bin/env bash
# Makes podman run containers on a machine like CI's (as root): Debian's podman 4.3 with
# crun fails on hybrid cgroups, so runc; and explicit default ulimits within this machine's
# hard limits (podman's defaults ask for more than a container may have here; an nproc of
# 65536 was refused too, under a hard limit of 96369, so it asks for at most 4096). Writes
# /etc/containers/containers.conf unless one is there already (yours wins), then runs
# a container to check.
#   sudo scripts/podman-setup.sh
set -euo pipefail
conf=/etc/containers/containers.conf
if [ ! -e "$conf" ]; then
    cap() { local h="$1"; [ "$h" = unlimited ] && h=1048576; [ "$h" -gt "$2" ] && h="$2"; echo "$h"; }
    nofile=$(cap "$(ulimit -Hn)" 65536)
    nproc=$(cap "$(ulimit -Hu)" 4096)
    mkdir -p "$(dirname "$conf")"
    cat > "$conf" <<CONF
# Written by the Venn testbed's scripts/podman-setup.sh.
[containers]
log_driver = "k8s-file"
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
CONF
    echo "podman-setup: wrote $conf (runc; nofile $nofile, nproc $nproc)"
fi
podman info --format 'podman-setup: podman {{.Version.Version}}, runtime {{.Host.OCIRuntime.Name}}, cgroups {{.Host.CgroupsVersion}}'
