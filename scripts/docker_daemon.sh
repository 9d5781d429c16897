#!/usr/bin/env bash
# A Docker daemon of the project's own, and the base image that task sandboxes run in.
#
#   bash scripts/docker_daemon.sh start    # start (or reuse) the daemon, build the image if missing
#   bash scripts/docker_daemon.sh stop     # stop the daemon that `start` started (by its pid)
#   bash scripts/docker_daemon.sh status   # say whether it runs; exit 1 if not
#
# `start` prints exactly one line on stdout, `export DOCKER_HOST=unix://...`, so that
#   eval "$(bash scripts/docker_daemon.sh start)"
# points the docker SDK (and the CLI) at it; progress goes to stderr. Idempotent: a second
# `start` reuses the running daemon and the built image (seconds).
#
# The daemon keeps everything under AUTOCOMPACT_DOCKER_DIR (default /var/lib/autocompact-docker):
# its data root, exec root, pid file, socket and log, and the cached base rootfs tarball. It
# never touches a system daemon (/var/run/docker.sock stays as it is). It runs without
# networking of its own (--bridge=none, no iptables): containers use network_mode="none".
#
# The base image (AUTOCOMPACT_BASE_IMAGE, default autocompact/base:latest) is Debian minbase
# with python3, python3-pytest and git: `debootstrap` from the host's Debian mirror (or
# AUTOCOMPACT_DEBIAN_MIRROR), then `docker import`. Nothing is pulled from a registry. The build
# is atomic: one build at a time (a lock), the rootfs quiesced (debootstrap's leftover processes
# gone, its mounts undone) before it is archived, files named *.partial until complete (and
# never reused), the image tagged only once a container of it ran pytest; a failed build is
# retried once from scratch.
#
# Daemons with different AUTOCOMPACT_DOCKER_DIRs run side by side: each has its own socket,
# data and exec roots, containerd (started by dockerd under the exec root) and containerd
# namespace.
set -euo pipefail

STATE_DIR="${AUTOCOMPACT_DOCKER_DIR:-/var/lib/autocompact-docker}"
IMAGE="${AUTOCOMPACT_BASE_IMAGE:-autocompact/base:latest}"
PACKAGES="python3,python3-pytest,git"
SOCKET="$STATE_DIR/docker.sock"
PIDFILE="$STATE_DIR/dockerd.pid"
LOG="$STATE_DIR/dockerd.log"
ROOTFS_TAR="$STATE_DIR/base-rootfs.tar"
ROOTFS="$STATE_DIR/rootfs.partial"
if [[ "$STATE_DIR" == /var/lib/autocompact-docker ]]; then
  NAMESPACE=autocompact
else
  NAMESPACE="autocompact-$(printf '%s' "$STATE_DIR" | sha256sum | cut -c1-12)"
fi
START_TIMEOUT_S=60
STOP_TIMEOUT_S=30

say() { echo "docker_daemon: $*" >&2; }
die() { say "error: $*"; exit 1; }

docker_cli() { docker -H "unix://$SOCKET" "$@"; }

daemon_pid() {
  # The pid in our pid file, if that process is alive and is a dockerd.
  [[ -s "$PIDFILE" ]] || return 1
  local pid
  pid="$(cat "$PIDFILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == dockerd ]] || return 1
  echo "$pid"
}

answers() { docker_cli version >/dev/null 2>&1; }

ensure_installed() {
  [[ "$(id -u)" == 0 ]] || die "must run as root (dockerd and debootstrap need it)"
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  if ((${#missing[@]})); then
    say "installing ${missing[*]} (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 \
      || die "apt-get install ${missing[*]} failed"
  fi
  command -v docker >/dev/null || die "the docker CLI is missing after installing docker.io"
}

start_daemon() {
  mkdir -p "$STATE_DIR"
  local pid
  if pid="$(daemon_pid)"; then
    if answers; then
      say "reusing dockerd (pid $pid) on $SOCKET"
      return
    fi
    die "dockerd (pid $pid, from $PIDFILE) runs but does not answer on $SOCKET; see $LOG," \
      "or run '$0 stop' first"
  fi
  rm -f "$PIDFILE" "$SOCKET"
  say "starting dockerd (log: $LOG)"
  # Own namespaces in containerd too, so a system daemon's containers are never ours.
  setsid nohup dockerd \
    --host "unix://$SOCKET" \
    --data-root "$STATE_DIR/data" \
    --exec-root "$STATE_DIR/exec" \
    --pidfile "$PIDFILE" \
    --storage-driver=overlay2 \
    --iptables=false --ip6tables=false --bridge=none \
    --containerd-namespace "$NAMESPACE" \
    --containerd-plugins-namespace "$NAMESPACE-plugins" \
    >"$LOG" 2>&1 </dev/null &
  local launched=$! waited=0
  until answers; do
    if ! kill -0 "$launched" 2>/dev/null; then
      tail -n 20 "$LOG" >&2
      die "dockerd exited during start (log above, full log in $LOG)"
    fi
    ((waited++ < START_TIMEOUT_S * 5)) || {
      tail -n 20 "$LOG" >&2
      die "dockerd did not answer on $SOCKET within ${START_TIMEOUT_S}s"
    }
    sleep 0.2
  done
  say "dockerd (pid $(daemon_pid || echo "$launched")) answers on $SOCKET"
}

debian_mirror() {
  if [[ -n "${AUTOCOMPACT_DEBIAN_MIRROR:-}" ]]; then
    echo "$AUTOCOMPACT_DEBIAN_MIRROR"
    return
  fi
  local mirror
  # deb822 sources: the URIs of a stanza whose Suites name the release itself.
  mirror="$(awk -v suite="$1" '
    /^URIs:/ { uris = $2 }
    /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) found = uris }
    /^$/ { uris = "" }
    END { if (found) print found }' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)"
  if [[ -z "$mirror" && -f /etc/apt/sources.list ]]; then
    mirror="$(awk -v suite="$1" '$1 == "deb" && $3 == suite { print $2; exit }' \
      /etc/apt/sources.list)"
  fi
  echo "${mirror:-http://deb.debian.org/debian}"
}

processes_in() {
  # Pids of the processes whose root or working directory lies in the rootfs.
  local proc link
  for proc in /proc/[0-9]*; do
    for link in "$proc/root" "$proc/cwd"; do
      link="$(readlink "$link" 2>/dev/null)" || continue
      if [[ "$link" == "$ROOTFS" || "$link" == "$ROOTFS"/* ]]; then
        echo "${proc#/proc/}"
        break
      fi
    done
  done
}

quiesce_rootfs() {
  # Wait (up to 10 s, then kill) for what debootstrap left running in the rootfs (a tarball
  # taken while they write reads "file changed as we read it"), and undo its mounts.
  local pids waited=0
  while pids="$(processes_in)" && [[ -n "$pids" ]]; do
    if ((waited++ >= 50)); then
      say "killing processes left in $ROOTFS: $(echo $pids)"
      kill -KILL $pids 2>/dev/null || true
      sleep 1
      break
    fi
    sleep 0.2
  done
  awk -v root="$ROOTFS" '$2 == root || index($2, root "/") == 1 { print $2 }' /proc/self/mounts \
    | sort -r | while read -r mount; do umount -l "$mount" || true; done
}

remove_partials() {
  [[ -e "$ROOTFS" ]] && quiesce_rootfs
  rm -rf --one-file-system "$ROOTFS" "$ROOTFS_TAR.partial"
}

valid_rootfs_tar() {
  # A complete archive (tar reads it to the end) holding the interpreter.
  tar -tf "$1" 2>/dev/null | grep -x './usr/bin/python3' >/dev/null
}

build_rootfs_tar() {
  # The rootfs tarball at $ROOTFS_TAR, or status 1 (and no tarball) saying why on stderr.
  local suite mirror
  suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
  [[ "$suite" =~ ^[a-z]+$ ]] || suite=bookworm
  mirror="$(debian_mirror "$suite")"
  say "debootstrap $suite from $mirror with $PACKAGES (about a minute)"
  remove_partials
  if ! debootstrap --variant=minbase --include="$PACKAGES" "$suite" "$ROOTFS" "$mirror" \
    >"$STATE_DIR/debootstrap.log" 2>&1; then
    tail -n 20 "$STATE_DIR/debootstrap.log" >&2
    say "debootstrap failed (log above)"
    remove_partials
    return 1
  fi
  quiesce_rootfs
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
  if ! tar --numeric-owner --one-file-system -C "$ROOTFS" -cf "$ROOTFS_TAR.partial" . \
    || ! valid_rootfs_tar "$ROOTFS_TAR.partial"; then
    say "archiving $ROOTFS failed"
    remove_partials
    return 1
  fi
  mv "$ROOTFS_TAR.partial" "$ROOTFS_TAR" || return 1
  remove_partials
}

import_image() {
  # Import the tarball untagged, tag it $IMAGE only once a container of it runs pytest.
  local id
  say "importing $ROOTFS_TAR"
  id="$(docker_cli import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["sleep", "infinity"]' \
    "$ROOTFS_TAR")" || { say "docker import of $ROOTFS_TAR failed"; return 1; }
  if ! docker_cli run --rm --network none "$id" python3 -m pytest --version >&2; then
    say "a container of the imported image cannot run python3 -m pytest"
    docker_cli rmi "$id" >/dev/null 2>&1 || true
    return 1
  fi
  docker_cli tag "$id" "$IMAGE" || { say "docker tag $IMAGE failed"; return 1; }
  say "image $IMAGE built"
}

ensure_image() {
  exec 9>"$STATE_DIR/image.lock"
  flock 9  # another `start` building the image: wait for it, then reuse its image
  if docker_cli image inspect "$IMAGE" >/dev/null 2>&1; then
    say "image $IMAGE present"
    return
  fi
  local attempt
  for attempt in 1 2; do
    if [[ -s "$ROOTFS_TAR" ]] && ! valid_rootfs_tar "$ROOTFS_TAR"; then
      say "$ROOTFS_TAR is incomplete; building it again"
      rm -f "$ROOTFS_TAR"
    fi
    if { [[ -s "$ROOTFS_TAR" ]] || build_rootfs_tar; } && import_image; then
      return
    fi
    rm -f "$ROOTFS_TAR"  # a tarball that made no working image is not used again
    ((attempt == 2)) || say "building image $IMAGE failed; trying once more from scratch"
  done
  die "could not build image $IMAGE (twice; see the messages above)"
}

stop_daemon() {
  local pid
  if ! pid="$(daemon_pid)"; then
    say "no dockerd of ours is running (pid file: $PIDFILE)"
    rm -f "$PIDFILE"
    return
  fi
  say "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((waited++ >= STOP_TIMEOUT_S * 5)); then
      say "dockerd (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT_S}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
  rm -f "$PIDFILE"
}

case "${1:-}" in
  start)
    ensure_installed
    start_daemon
    ensure_image
    echo "export DOCKER_HOST=unix://$SOCKET"
    ;;
  stop)
    stop_daemon
    ;;
  status)
    if pid="$(daemon_pid)" && answers; then
      say "dockerd (pid $pid) answers on $SOCKET"
      echo "export DOCKER_HOST=unix://$SOCKET"
    else
      say "no dockerd of ours answers on $SOCKET"
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
