#!/usr/bin/env bash
# Starts a one-node Garage 2.5.0 on 127.0.0.1 in DIR (for runs by hand,
# e.g. `multiarc bench --workload object --endpoint ...`), with a bucket
# and a key, and prints the shell lines that point a client at it:
#
#   eval "$(scripts/garage-up.sh /tmp/garage BUCKET)"
#   multiarc bench --workload object --endpoint "$GARAGE_ENDPOINT" --bucket BUCKET
#   kill "$GARAGE_PID"
#
# Progress and errors go to stderr; stdout carries only the export lines.
set -euo pipefail
die() { echo "garage-up: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: scripts/garage-up.sh DIR BUCKET"
dir=$1 bucket=$2
garage=$(command -v garage || echo "${CARGO_HOME:-$HOME/.cargo}/bin/garage")
[ -x "$garage" ] || die "garage is not installed (cargo install --locked garage@2.5.0 --no-default-features --features bundled-libs,sqlite; .ci/run does it)"
[ -e "$dir" ] && die "$dir exists; give a new directory"
mkdir -p "$dir"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
s3_port=$(port) rpc_port=$(port) admin_port=$(port)
cat > "$dir/garage.toml" <<EOF
metadata_dir = "$dir/meta"
data_dir = "$dir/data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:$rpc_port"
rpc_public_addr = "127.0.0.1:$rpc_port"
rpc_secret = "$(python3 -c 'import os; print(os.urandom(32).hex())')"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$s3_port"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:$admin_port"
EOF
g() { "$garage" -c "$dir/garage.toml" "$@"; }
RUST_LOG=warn setsid "$garage" -c "$dir/garage.toml" server >"$dir/log" 2>&1 < /dev/null &
pid=$!
node=
for _ in $(seq 100); do
  node=$(g node id -q 2>/dev/null | cut -d@ -f1) && [ -n "$node" ] && break
  kill -0 "$pid" 2>/dev/null || die "garage exited at start: $(tail -3 "$dir/log")"
  sleep 0.2
done
[ -n "$node" ] || { kill "$pid"; die "garage did not answer within 20 s"; }
g layout assign -z dc1 -c 1G "$node" >/dev/null
g layout apply --version 1 >/dev/null
key_id=GK$(python3 -c 'import os; print(os.urandom(12).hex())')
secret=$(python3 -c 'import os; print(os.urandom(32).hex())')
for _ in $(seq 50); do
  g key import --yes -n local "$key_id" "$secret" >/dev/null 2>&1 && break
  sleep 0.2
done
# Right after the layout is applied, Garage's own SQLite writes can still
# hold the database ("database is locked", a 503): try again for a while.
created=
for _ in $(seq 50); do
  g bucket create "$bucket" >/dev/null 2>"$dir/create.err" && { created=1; break; }
  sleep 0.2
done
[ -n "$created" ] || { kill "$pid"; die "bucket create $bucket failed: $(tail -1 "$dir/create.err")"; }
g bucket allow --read --write --owner "$bucket" --key "$key_id" >/dev/null
echo "garage-up: $("$garage" --version | head -1) on http://127.0.0.1:$s3_port, pid $pid, bucket $bucket" >&2
cat <<EOF
export GARAGE_PID=$pid GARAGE_ENDPOINT=http://127.0.0.1:$s3_port
export AWS_ACCESS_KEY_ID=$key_id AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=garage
EOF
