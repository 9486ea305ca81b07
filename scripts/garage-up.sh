#!/usr/bin/env bash
# Starts Garage 2.5.0 on 127.0.0.1 in DIR: one node, or N nodes with
# replication factor N (`--nodes 3`: every object on every node, so reads
# go on while a node is down), with a bucket and a key; prints the shell
# lines that point a client at it:
#
#   eval "$(scripts/garage-up.sh [--nodes N] DIR BUCKET)"
#   multiarc bench --workload object --endpoint "$GARAGE_ENDPOINT" --bucket BUCKET
#   kill $GARAGE_PIDS
#
# GARAGE_ENDPOINT is node 0's S3 endpoint; GARAGE_ENDPOINTS all of them
# (space-separated, in node order), GARAGE_PIDS their processes.
# Progress and errors go to stderr; stdout carries only the export lines.
set -euo pipefail
die() { echo "garage-up: $*" >&2; exit 1; }
nodes=1
if [ "${1:-}" = --nodes ]; then
  nodes=$2
  shift 2
fi
[ $# -eq 2 ] || die "usage: scripts/garage-up.sh [--nodes N] DIR BUCKET"
[[ "$nodes" =~ ^[1-9]$ ]] || die "--nodes $nodes: from 1 to 9"
dir=$1 bucket=$2
garage=$(command -v garage || echo "${CARGO_HOME:-$HOME/.cargo}/bin/garage")
[ -x "$garage" ] || die "garage is not installed (cargo install --locked garage@2.5.0 --no-default-features --features bundled-libs,sqlite; .ci/run does it)"
[ -e "$dir" ] && die "$dir exists; give a new directory"
mkdir -p "$dir"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
secret=$(python3 -c 'import os; print(os.urandom(32).hex())')
pids=() endpoints=() rpcs=()
for n in $(seq 0 $((nodes - 1))); do
  s3_port=$(port) rpc_port=$(port) admin_port=$(port)
  mkdir -p "$dir/node$n"
  cat > "$dir/node$n/garage.toml" <<EOF
metadata_dir = "$dir/node$n/meta"
data_dir = "$dir/node$n/data"
db_engine = "sqlite"
replication_factor = $nodes
rpc_bind_addr = "127.0.0.1:$rpc_port"
rpc_public_addr = "127.0.0.1:$rpc_port"
rpc_secret = "$secret"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$s3_port"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:$admin_port"
EOF
  RUST_LOG=warn setsid "$garage" -c "$dir/node$n/garage.toml" server >"$dir/node$n/log" 2>&1 < /dev/null &
  pids+=($!)
  endpoints+=("http://127.0.0.1:$s3_port")
  rpcs+=("127.0.0.1:$rpc_port")
done
g() { "$garage" -c "$dir/node0/garage.toml" "$@"; }
node_id() { "$garage" -c "$dir/node$1/garage.toml" node id -q 2>/dev/null | cut -d@ -f1; }
stop() { kill "${pids[@]}" 2>/dev/null || true; }
ids=()
for n in $(seq 0 $((nodes - 1))); do
  id=
  for _ in $(seq 100); do
    id=$(node_id "$n") && [ -n "$id" ] && break
    kill -0 "${pids[$n]}" 2>/dev/null || { stop; die "node $n exited at start: $(tail -3 "$dir/node$n/log")"; }
    sleep 0.2
  done
  [ -n "$id" ] || { stop; die "node $n did not answer within 20 s"; }
  ids+=("$id")
done
for n in $(seq 1 $((nodes - 1))); do
  g node connect "${ids[$n]}@${rpcs[$n]}" >/dev/null || { stop; die "connecting node $n"; }
done
for n in $(seq 0 $((nodes - 1))); do
  g layout assign -z "dc$n" -c 10G "${ids[$n]}" >/dev/null
done
g layout apply --version 1 >/dev/null
key_id=GK$(python3 -c 'import os; print(os.urandom(12).hex())')
key_secret=$(python3 -c 'import os; print(os.urandom(32).hex())')
for _ in $(seq 50); do
  g key import --yes -n local "$key_id" "$key_secret" >/dev/null 2>&1 && break
  sleep 0.2
done
# Right after the layout is applied, Garage's own SQLite writes can still
# hold the database ("database is locked", a 503): try again for a while.
created=
for _ in $(seq 50); do
  g bucket create "$bucket" >/dev/null 2>"$dir/create.err" && { created=1; break; }
  sleep 0.2
done
[ -n "$created" ] || { stop; die "bucket create $bucket failed: $(tail -1 "$dir/create.err")"; }
g bucket allow --read --write --owner "$bucket" --key "$key_id" >/dev/null
echo "garage-up: $("$garage" --version | head -1), $nodes node(s) (replication $nodes) on ${endpoints[*]}, bucket $bucket" >&2
cat <<EOF
export GARAGE_PIDS="${pids[*]}" GARAGE_PID=${pids[0]} GARAGE_ENDPOINT=${endpoints[0]} GARAGE_ENDPOINTS="${endpoints[*]}"
export AWS_ACCESS_KEY_ID=$key_id AWS_SECRET_ACCESS_KEY=$key_secret AWS_REGION=garage
EOF
