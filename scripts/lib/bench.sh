# Sourced by the bench scripts: one EXIT trap that undoes what the run made,
# one way to start ../shared/bench/ceiling.sh's server and read its answer.
#
#   at_exit CMD             run CMD at exit (the last registered runs first)
#   bench_dir VAR NAME [D]  VAR=D (made if missing), or a fresh temp dir
#                           $TMPDIR/NAME.XXXXXX that is removed at exit
#   ceiling_start ROWS D    ceiling.sh --keep --rows ROWS --dir D: writes the
#                           seeded files into D, measures the server's own rates
#                           and leaves its server running; sets ceiling_out, url,
#                           stop_cmd and server_dir. The server is stopped and its
#                           data (gigabytes after a big run) removed at exit.
#
# Runs killed before this existed left 16 GB of servers and inputs in /tmp.

_bench_at_exit=()
at_exit() { _bench_at_exit=("$1" ${_bench_at_exit[@]+"${_bench_at_exit[@]}"}); }
_bench_run_at_exit() {
  local c
  for c in ${_bench_at_exit[@]+"${_bench_at_exit[@]}"}; do eval "$c" >/dev/null 2>&1 || true; done
}
trap _bench_run_at_exit EXIT

bench_dir() {
  local d=${3:-}
  if [ -z "$d" ]; then
    d=$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX")
    at_exit "rm -rf '$d'"
  fi
  mkdir -p "$d"; d=$(cd "$d" && pwd)
  # ceiling.sh's server runs as postgres and writes its files here.
  [ "$(id -u)" != 0 ] || chown postgres "$d"
  chmod 755 "$d"
  printf -v "$1" %s "$d"
}

# ceiling.sh lives in shared/bench next to the checkout (../shared), or next to
# the directory of worktrees (../../shared); CEILING_SH=path overrides.
ceiling_sh() {
  local c
  for c in "${CEILING_SH:-}" ../shared/bench/ceiling.sh ../../shared/bench/ceiling.sh; do
    [ -n "$c" ] && [ -f "$c" ] && { echo "$c"; return; }
  done
  echo "no shared/bench/ceiling.sh in .. or ../..: set CEILING_SH=/path/to/ceiling.sh" >&2
  return 2
}

ceiling_start() {
  local sh
  sh=$(ceiling_sh) || exit 2
  ceiling_out=$(bash "$sh" --keep --rows "$1" --dir "$2" 2>&1 | grep -v '^initdb\|NOTICE') || true
  url=$(echo "$ceiling_out" | sed -n 's/^server left running: //p')
  stop_cmd=$(echo "$ceiling_out" | sed -n 's/^stop it with: //p')
  server_dir=$(echo "$url" | sed -n 's/.*host=\([^&]*\).*/\1/p')
  [ -n "$url" ] || { echo "$sh failed: $ceiling_out" >&2; exit 1; }
  at_exit "$stop_cmd; case '$server_dir' in */chute-ceiling-server.*) rm -rf '$server_dir';; esac"
}

# CPU accounting, for the CPU-per-row tables (issue 34): on a machine whose
# cores the loader and the server share, the rate a cell can reach is the
# cores over the CPU both spend on a row.
#
#   server_cpu               CPU seconds (user + system) ceiling_start's server
#                            has used so far: the postmaster's own, its ended
#                            children's (in its cutime/cstime once it waited
#                            for them) and its live children's, from /proc
#   cpu_timed FILE CMD...    runs CMD, appending "user+system seconds" of CMD
#                            and its children to FILE (through /usr/bin/time)
#   cpu_line N CPU S0 S1 W   "loader-µs server-µs busy" for N rows: CPU seconds
#                            of the loader, the server's readings before and
#                            after, wall seconds (busy: the share of every core)
# scripts/ensure-deps, which the benchmark scripts run first, installs it.
[ -x /usr/bin/time ] || { echo "the CPU figures need /usr/bin/time: scripts/ensure-deps installs it (or apt-get install time)" >&2; exit 2; }
server_cpu() {
  local pm own own2 kids
  pm=$(head -n1 "$server_dir/db/postmaster.pid")
  # A backend reaped between the readings would be in neither: read the
  # postmaster before and after its children, until nothing moved between.
  while :; do
    own=$(_ticks "$pm" 1)
    kids=$(for p in $(pgrep -P "$pm" || true); do _ticks "$p" 0; done | awk '{ s += $1 } END { print s + 0 }')
    own2=$(_ticks "$pm" 1)
    [ "$own" != "$own2" ] || break
  done
  awk -v t="$((own + kids))" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}
# Clock ticks of process $1 (user + system), with its waited-for children's when $2 is 1.
_ticks() {
  sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk -v all="$2" '{ print $12 + $13 + (all ? $14 + $15 : 0) }' || true
}
cpu_timed() {
  local f=$1; shift
  /usr/bin/time -f '%U %S' -o "$f.last" "$@"
  local rc=$?
  tail -n1 "$f.last" | awk '{ printf "%.2f\n", $1 + $2 }' >> "$f"
  return $rc
}
cpu_line() {
  awk -v n="$1" -v c="$2" -v s0="$3" -v s1="$4" -v w="$5" -v cores="$(nproc)" \
    'BEGIN { printf "%.3f %.3f %.2f\n", c / n * 1e6, (s1 - s0) / n * 1e6, (c + s1 - s0) / (w * cores) }'
}
# Medians, column by column, of the "loader-µs server-µs busy" lines in FILE.
cpu_medians() {
  local i out=()
  for i in 1 2 3; do out+=("$(awk -v i="$i" '{ print $i }' "$1" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"); done
  echo "${out[*]}"
}
