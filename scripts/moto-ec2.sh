#!/usr/bin/env bash
# moto-ec2.sh: an emulated EC2 and SSM on this machine (moto), for trying
# examples/aws and examples/aws-factory without an AWS account. As the
# acceptance tests do (overlay/glidein/ec2/ec2test), it starts moto's server
# on a loopback port with test credentials, and it registers an image for
# the glideins' instances.
#
#   scripts/moto-ec2.sh start [-p PORT] [DIR]
#   scripts/moto-ec2.sh boot DIR
#   scripts/moto-ec2.sh stop DIR
#
# start prints the lines to run in your shell: the test credentials and
# region, POND_VAR_endpoint and POND_VAR_ami, the examples' variables
# endpoint and ami (pondctl reads POND_VAR_NAME as -var NAME=...), and
# MOTO_EC2_DIR, the DIR of boot and stop:
#
#   eval "$(scripts/moto-ec2.sh start)"
#   pondctl apply -var agent_binary="$(command -v pondctl)" -var base_dir=/tmp/pond-ec2
#
# moto runs no virtual machine. boot stands for the instances' machines:
# it runs the user data of every instance that is running and not yet
# booted as a local process (each once; its output in
# DIR/instances/ID.log), with a shutdown command that terminates that
# instance in moto instead of this machine. Run it after each apply that
# launches instances. stop kills what boot started, then moto, and removes
# DIR.
#
# It needs Python's moto with its server (pip install 'moto[server]').
set -euo pipefail

die() { echo "moto-ec2.sh: $*" >&2; exit 1; }

usage() {
  sed -n '8,10p' "$0" | sed 's/^# *//' >&2
  exit 2
}

region=us-east-1
creds() {
  export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION="$region"
  export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
}

start() {
  local port=""
  while getopts "p:" o; do
    case "$o" in
      p) port="$OPTARG" ;;
      *) usage ;;
    esac
  done
  shift $((OPTIND - 1))
  python3 -c "import moto.server, boto3" 2>/dev/null || die "moto is not installed: pip install 'moto[server]'"
  if [ $# -gt 0 ]; then
    dir="$1"
    mkdir -p "$dir"
  else
    dir="$(mktemp -d /tmp/moto-ec2.XXXXXX)"
  fi
  dir="$(cd "$dir" && pwd)"
  [ ! -e "$dir/moto.pid" ] || die "$dir already holds a moto: stop it first"
  if [ -z "$port" ]; then
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  fi
  local endpoint="http://127.0.0.1:$port"
  setsid python3 -m moto.server -H 127.0.0.1 -p "$port" >"$dir/moto.log" 2>&1 </dev/null &
  echo $! >"$dir/moto.pid"
  echo "$endpoint" >"$dir/endpoint"
  for _ in $(seq 1 300); do
    if python3 -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1] + '/moto-api/')" "$endpoint" 2>/dev/null; then
      break
    fi
    kill -0 "$(cat "$dir/moto.pid")" 2>/dev/null || { cat "$dir/moto.log" >&2; die "moto exited"; }
    sleep 0.1
  done
  creds
  # An image for the instances, registered as one would register one's
  # own: the examples' ami variable.
  local ami
  ami="$(python3 - "$endpoint" "$region" <<'PY'
import sys, boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1], region_name=sys.argv[2])
out = ec2.register_image(Name="pond-glidein", Description="pondctl at agent_binary, runs its user data",
                         Architecture="x86_64", RootDeviceName="/dev/sda1", VirtualizationType="hvm",
                         BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 8}}])
print(out["ImageId"])
PY
)" || { stop "$dir"; die "registering an image failed"; }
  echo "$ami" >"$dir/ami"
  cat <<EOF
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=$region
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
export POND_VAR_endpoint=$endpoint POND_VAR_ami=$ami
export MOTO_EC2_DIR=$dir
# moto at $endpoint, image $ami; boot the instances with: $0 boot \$MOTO_EC2_DIR
# stop it with: $0 stop \$MOTO_EC2_DIR
EOF
}

boot() {
  dir="$1"
  [ -f "$dir/endpoint" ] || die "$dir holds no moto of moto-ec2.sh"
  local endpoint
  endpoint="$(cat "$dir/endpoint")"
  creds
  mkdir -p "$dir/instances" "$dir/bin"
  # shutdown, as the user data's last command: terminates the instance
  # the script stands for (POND_MOTO_INSTANCE), in moto.
  cat >"$dir/bin/shutdown" <<EOF
#!/bin/sh
exec python3 -c 'import os, boto3; boto3.client("ec2", endpoint_url="$endpoint", region_name="$region").terminate_instances(InstanceIds=[os.environ["POND_MOTO_INSTANCE"]])'
EOF
  chmod 755 "$dir/bin/shutdown"
  python3 - "$endpoint" "$region" "$dir/instances" <<'PY' | while read -r id; do
import base64, os, sys, boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1], region_name=sys.argv[2])
for r in ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"]:
    for i in r["Instances"]:
        iid = i["InstanceId"]
        path = os.path.join(sys.argv[3], iid + ".sh")
        if os.path.exists(path):
            continue
        ud = ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData")["UserData"].get("Value")
        if not ud:
            continue
        with open(path, "w") as f:
            f.write(base64.b64decode(ud).decode())
        print(iid)
PY
    # No metadata service: nothing listens at its address here (the
    # agent's spot notices find none), and nothing leaves this machine.
    POND_MOTO_INSTANCE="$id" AWS_ENDPOINT_URL="$endpoint" PATH="$dir/bin:$PATH" \
      AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1 \
      setsid sh "$dir/instances/$id.sh" >"$dir/instances/$id.log" 2>&1 </dev/null &
    echo "$! $id" >>"$dir/instances/pids"
    echo "booted $id (its output: $dir/instances/$id.log)"
  done
}

stop() {
  dir="$1"
  [ -f "$dir/moto.pid" ] || die "$dir holds no moto of moto-ec2.sh"
  if [ -f "$dir/instances/pids" ]; then
    while read -r pid _; do
      kill -TERM -- "-$pid" 2>/dev/null || true
    done <"$dir/instances/pids"
  fi
  kill -TERM -- "-$(cat "$dir/moto.pid")" 2>/dev/null || kill -TERM "$(cat "$dir/moto.pid")" 2>/dev/null || true
  rm -rf "$dir"
}

[ $# -ge 1 ] || usage
cmd="$1"
shift
case "$cmd" in
  start) start "$@" ;;
  boot) [ $# -eq 1 ] || usage; boot "$1" ;;
  stop) [ $# -eq 1 ] || usage; stop "$1" ;;
  *) usage ;;
esac
