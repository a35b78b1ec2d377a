#!/usr/bin/env bash
# Records tests/goodput/data/fleet_24.11: runs slurm_fleet_real_test.sh (its six jobs on a real
# cluster of one node) with Debian 13's Slurm 24.11 and MariaDB 11.8, in a debootstrap root, and
# copies the accounting dump, the jobs' logs, the window's end and the package versions there.
# Not a ctest test: it needs root and the network (debootstrap and apt-get), once.
# The sdcprobe binary is the host's build, run in the root by the host's own loader and libraries
# (copied to /opt/sdcprobe-host), so the root needs none of them.
# Usage: record_slurm_trixie.sh SDCPROBE [ROOT]   (ROOT default /var/tmp/sdcprobe-trixie, kept)
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "needs root (debootstrap, chroot)"; exit 1; }
src="$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)"
sdcprobe="$(readlink -f "$1")"
root="$(readlink -f "${2:-/var/tmp/sdcprobe-trixie}")"
out=tests/goodput/data/fleet_24.11

if [ ! -x "$root/usr/sbin/slurmdbd" ]; then
  debootstrap --variant=minbase trixie "$root"
  # No daemon starts at install time: the test starts its own.
  printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  chroot "$root" apt-get update
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm slurmdbd \
    slurmctld slurmd slurm-client munge mariadb-server mariadb-client python3 procps hostname
fi

host="$root/opt/sdcprobe-host"
rm -rf "$host"
mkdir -p "$host/lib"
cp "$sdcprobe" "$host/sdcprobe.bin"
ldd "$sdcprobe" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}' | xargs -I{} cp -L {} "$host/lib/"
cat > "$host/sdcprobe" <<'EOF'
#!/bin/sh
exec /opt/sdcprobe-host/lib/ld-linux-x86-64.so.2 --library-path /opt/sdcprobe-host/lib /opt/sdcprobe-host/sdcprobe.bin "$@"
EOF
chmod 755 "$host/sdcprobe"

mounted=()
cleanup() {
  local i pid
  # A batch step can outlive the test's daemons (slurmstepd retrying its completion): the root's
  # processes, all started here, end before its mounts.
  for pid in /proc/[0-9]*; do
    [ "$(readlink "$pid/root" 2>/dev/null)" = "$root" ] && kill -9 "${pid#/proc/}" 2>/dev/null
  done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || umount -l "${mounted[i]}"; done
}
trap cleanup EXIT
bind() {  # FROM TO
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounted+=("$2")
}
bind /proc "$root/proc"
bind /sys "$root/sys"
bind /dev "$root/dev"
bind /dev/pts "$root/dev/pts"
mkdir -p "$root/tmp"
mount -t tmpfs tmpfs "$root/tmp"
mounted+=("$root/tmp")
bind "$src" "$root/src"

rm -rf "${src:?}/$out"
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SDCPROBE_RECORD_DIR="/src/$out" \
  /src/tests/deploy/slurm_fleet_real_test.sh /opt/sdcprobe-host/sdcprobe /src/python /src/deploy
# shellcheck disable=SC2016 # dpkg-query's own ${fields}
chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' slurm-wlm slurmdbd slurmctld slurmd slurm-client munge \
  mariadb-server libmariadb3 python3 > "$src/$out/versions"
echo "recorded $src/$out"
