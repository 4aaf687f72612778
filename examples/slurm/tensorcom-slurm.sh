#!/bin/bash
# The steps the tensorcom Slurm jobs share. The batch scripts source it for
# the job's shape (tc_setup, tc_start_servers, tc_run_trainers,
# tc_stop_servers); srun runs it once per task as
#   tensorcom-slurm.sh serve   one serve-imagenet-shards, rank SLURM_PROCID
#   tensorcom-slurm.sh train   one trainer rank: TC_TRAINER with RANK, ...
#
# Parameters (environment; see README.md):
#   TC_SHARDS            shards to serve, a brace pattern (required)
#   TC_SERVERS_PER_NODE  servers per server node (4); server i of the job
#                        binds port TC_PORT + its index on its node
#   TC_PORT              first port of each node's range (7880)
#   TC_BIND_HOST         address the servers bind ('*': every interface;
#                        'node': the IPv4 address of the node's NodeAddr)
#   TC_CONNECT_HOST      address the trainers connect to (default: the
#                        server nodes' NodeAddr; the one-node job: 127.0.0.1)
#   TC_BATCH             images per batch (64)
#   TC_EPOCH_BATCHES     batches per server per epoch (0: the share as it is;
#                        set it for DDP: equal batch counts per rank)
#   TC_EPOCHS            server epochs (0: serve until the trainer ends)
#   TC_SERVER            the server program (serve-imagenet-shards)
#   TC_SERVER_ARGS       more server options ("-w 8 --size 224", ...)
#   TC_RANKS_PER_NODE    trainer ranks per trainer node (1; GPUs per node)
#   TC_TRAINER           the command of one trainer rank, run by bash with
#                        TC_URLS, TC_RANK_BATCHES, TC_EXAMPLES, RANK,
#                        WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
#                        set (default: examples/pytorch/train.py, one epoch
#                        of TC_RANK_BATCHES steps)
#   TC_MASTER_PORT       torch.distributed's rendezvous port (29500)
#   TC_STOP_WAIT         seconds the servers get to exit once told (20)
#   TC_CHECKPOINT        checkpoint directory (requeue.sbatch): the trainers'
#                        token files there (*.data.json, *.data-rank*.json)
#                        are merged into servers-token.json for the servers'
#                        --resume; the default TC_TRAINER checkpoints to
#                        model.pt there and resumes from it
#   TC_PYTHON            the Python with tensorcom, for the merge (python3)
#   TC_CHECKPOINT_WAIT   seconds the trainer ranks get to checkpoint and exit
#                        after USR1 before they are killed (60)
#   TC_KILL_ON_BAD_EXIT  srun --kill-on-bad-exit of the trainer step (1; 0 with
#                        TC_CHECKPOINT: a rank that stops first must not
#                        kill the others while they checkpoint)
set -euo pipefail

: "${TC_SERVERS_PER_NODE:=4}" "${TC_PORT:=7880}" "${TC_BIND_HOST:=*}" "${TC_BATCH:=64}"
: "${TC_EPOCH_BATCHES:=0}" "${TC_EPOCHS:=0}" "${TC_SERVER:=serve-imagenet-shards}" "${TC_SERVER_ARGS:=}"
: "${TC_RANKS_PER_NODE:=1}" "${TC_MASTER_PORT:=29500}" "${TC_STOP_WAIT:=20}"
: "${TC_CHECKPOINT:=}" "${TC_PYTHON:=python3}" "${TC_CHECKPOINT_WAIT:=60}" "${TC_KILL_ON_BAD_EXIT:=1}"
export TC_SERVERS_PER_NODE TC_PORT TC_BIND_HOST TC_BATCH TC_EPOCH_BATCHES TC_EPOCHS TC_SERVER TC_SERVER_ARGS
export TC_RANKS_PER_NODE TC_MASTER_PORT TC_CHECKPOINT TC_PYTHON
TC_SLURM_SCRIPT=$(readlink -f "${BASH_SOURCE[0]}")
TC_EXAMPLES=$(dirname "$(dirname "$TC_SLURM_SCRIPT")")
if [ -z "${TC_TRAINER:-}" ]; then
  # A command line, expanded in each rank by tc_train, not here.
  # shellcheck disable=SC2016,SC2089
  TC_TRAINER='python3 "$TC_EXAMPLES/pytorch/train.py" --data "tensorcom:$TC_URLS" --epochs 1 --epoch-size "$TC_RANK_BATCHES"'
  if [ -n "$TC_CHECKPOINT" ]; then
    # shellcheck disable=SC2016,SC2089
    TC_TRAINER+=' --checkpoint "$TC_CHECKPOINT/model.pt" --resume'
  fi
fi
# shellcheck disable=SC2090
export TC_SLURM_SCRIPT TC_EXAMPLES TC_TRAINER

tc_say() { echo "tensorcom-slurm: $*" >&2; }
tc_fail() { tc_say "error: $*"; exit 1; }

# The address other nodes reach node $1 at: its NodeAddr (which Slurm
# defaults to the node's name).
tc_node_address() {
  scontrol show node -o "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'
}

# "{a,b}" of the addresses of the nodes in node list $1 ("a" for one node).
tc_address_braces() {
  local addresses=() name
  for name in $(scontrol show hostnames "$1"); do addresses+=("$(tc_node_address "$name")"); done
  [ "${#addresses[@]}" -gt 0 ] || tc_fail "no nodes in '$1'"
  if [ "${#addresses[@]}" -eq 1 ]; then echo "${addresses[0]}"; else (IFS=,; echo "{${addresses[*]}}"); fi
}

# Sets the job's shape from the server and trainer node lists, $1 and $2:
# TC_URLS, every server's URL for a connecting PULL in server rank order
# (host-major, as brace expansion orders them), and TC_RANK_BATCHES, the
# batches each trainer rank gets per epoch.
tc_setup() {
  [ -n "${TC_SHARDS:-}" ] || tc_fail "TC_SHARDS is not set: name the shards to serve (a brace pattern)"
  TC_SERVER_NODES=$(scontrol show hostnames "$1" | wc -l)
  TC_TRAINER_NODES=$(scontrol show hostnames "$2" | wc -l)
  TC_WORLD=$((TC_SERVER_NODES * TC_SERVERS_PER_NODE))
  local ranks=$((TC_TRAINER_NODES * TC_RANKS_PER_NODE))
  ((TC_WORLD % ranks == 0)) || tc_fail "$TC_WORLD servers cannot be shared equally by $ranks trainer ranks"
  local hosts=${TC_CONNECT_HOST:-}
  [ -n "$hosts" ] || hosts=$(tc_address_braces "$1")
  TC_URLS="zrpull://$hosts:{$TC_PORT..$((TC_PORT + TC_SERVERS_PER_NODE - 1))}"
  # shellcheck disable=SC2017  # TC_WORLD divides exactly: checked above
  TC_RANK_BATCHES=$((TC_WORLD / ranks * TC_EPOCH_BATCHES))
  TC_MASTER_ADDR=$(tc_node_address "$(scontrol show hostnames "$2" | head -n 1)")
  export TC_URLS TC_RANK_BATCHES TC_MASTER_ADDR
  tc_say "$TC_WORLD servers ($TC_SERVER_NODES nodes x $TC_SERVERS_PER_NODE), $ranks trainer ranks; $TC_URLS"
  [ "$TC_EPOCH_BATCHES" -gt 0 ] || tc_say "TC_EPOCH_BATCHES is 0: ranks may get unequal batch counts (DDP hangs)"
}

# Starts every server in the background (srun options in "$@"); sets TC_SERVERS_PID.
tc_start_servers() {
  srun "$@" --ntasks-per-node="$TC_SERVERS_PER_NODE" --distribution=block --kill-on-bad-exit=1 \
    bash "$TC_SLURM_SCRIPT" serve &
  TC_SERVERS_PID=$!
}

# Runs every trainer rank (srun options in "$@") and returns its status. The
# step runs in the background so that a trapped signal (tc_on_warning) is
# handled while the ranks train: bash runs traps only between commands.
tc_run_trainers() {
  srun "$@" --ntasks-per-node="$TC_RANKS_PER_NODE" --distribution=block --kill-on-bad-exit="$TC_KILL_ON_BAD_EXIT" \
    bash "$TC_SLURM_SCRIPT" train &
  TC_TRAINERS_PID=$!
  local pid=$TC_TRAINERS_PID
  while jobs -rp | grep -qx "$pid"; do
    if [ -n "${TC_WARNED_AT:-}" ] && ((SECONDS - TC_WARNED_AT > TC_CHECKPOINT_WAIT)); then
      tc_say "the trainer ranks did not stop within $TC_CHECKPOINT_WAIT s of USR1: killing them"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 1 &
    wait $! || true  # a trapped signal ends the wait early
  done
  TC_TRAINERS_PID=
  wait "$pid"
}

# The trap for USR1, which Slurm sends the batch shell ahead of the time
# limit (sbatch --signal=B:USR1@SECONDS): passes it on to the trainer ranks
# (srun forwards it to every task), which checkpoint after their current
# step and exit; tc_requeue_if_warned then requeues the job.
tc_on_warning() {
  [ -z "${TC_WARNED_AT:-}" ] || return 0
  TC_WARNED_AT=$SECONDS
  tc_say "USR1: the time limit is near; telling the trainer ranks to checkpoint"
  if [ -n "${TC_TRAINERS_PID:-}" ]; then
    kill -USR1 "$TC_TRAINERS_PID" 2>/dev/null || true
  fi
}

# After the trainers ended with status $1: if USR1 came and they did not
# all finish (status 0), stops the servers and requeues the job (the
# requeued job resumes from the checkpoint directory: tc_prepare_resume).
tc_requeue_if_warned() {
  [ -n "${TC_WARNED_AT:-}" ] || return 0
  if [ "$1" -eq 0 ]; then
    tc_say "the trainer ranks finished before the time limit: not requeueing"
    return 0
  fi
  tc_stop_servers
  tc_say "trainer ranks stopped (status $1): requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
  # Slurm now ends this run of the job; wait for it rather than end "failed".
  sleep 60
  tc_fail "job $SLURM_JOB_ID was not requeued"
}

# With TC_CHECKPOINT: gives the servers --meta and, if the trainers left
# token files there, their union (tensorcom.resume merge) as
# TC_RESUME_TOKEN, which tc_serve passes as --resume.
tc_prepare_resume() {
  TC_RESUME_TOKEN=
  if [ -z "$TC_CHECKPOINT" ]; then
    export TC_RESUME_TOKEN
    return 0
  fi
  mkdir -p "$TC_CHECKPOINT"
  [[ " $TC_SERVER_ARGS " == *" --meta "* ]] || TC_SERVER_ARGS+=" --meta"
  local tokens
  tokens=$(find "$TC_CHECKPOINT" -maxdepth 1 -type f \( -name '*.data.json' -o -name '*.data-rank*.json' \) | sort)
  if [ -z "$tokens" ]; then
    tc_say "no token files in $TC_CHECKPOINT: the servers start from the beginning"
  else
    TC_RESUME_TOKEN=$TC_CHECKPOINT/servers-token.json
    # shellcheck disable=SC2086  # one path a line, written by the trainers
    (IFS=$'\n'; "$TC_PYTHON" -m tensorcom.resume merge "$TC_RESUME_TOKEN" $tokens) >&2 ||
      tc_fail "cannot merge the token files in $TC_CHECKPOINT"
    tc_say "servers resume from $TC_RESUME_TOKEN (restart ${SLURM_RESTART_COUNT:-0})"
  fi
  export TC_SERVER_ARGS TC_RESUME_TOKEN
}

# Tells the servers to finish (srun passes SIGTERM on to them) and waits for
# them, at most TC_STOP_WAIT seconds.
tc_stop_servers() {
  [ -n "${TC_SERVERS_PID:-}" ] || return 0
  kill -TERM "$TC_SERVERS_PID" 2>/dev/null || true
  local waited=0
  while kill -0 "$TC_SERVERS_PID" 2>/dev/null && ((waited < TC_STOP_WAIT)); do
    sleep 1
    waited=$((waited + 1))
  done
  kill -KILL "$TC_SERVERS_PID" 2>/dev/null || true
  wait "$TC_SERVERS_PID" 2>/dev/null || true
  TC_SERVERS_PID=
}

# One server: rank SLURM_PROCID of all the job's servers, on port
# TC_PORT + its index on this node. A task of tc_start_servers.
tc_serve() {
  # The step's task count: SLURM_NTASKS is the allocation's (a het
  # component's), not this step's.
  local world=$SLURM_STEP_NUM_TASKS bind=$TC_BIND_HOST
  if [ "$bind" = node ]; then
    # ZeroMQ binds addresses and interfaces, not host names.
    bind=$(getent ahostsv4 "$(tc_node_address "$SLURMD_NODENAME")" | head -n 1 | cut -d ' ' -f 1)
    [ -n "$bind" ] || tc_fail "no IPv4 address for node $SLURMD_NODENAME"
  fi
  local resume=()
  [ -z "${TC_RESUME_TOKEN:-}" ] || resume=(--resume "$TC_RESUME_TOKEN")
  tc_say "server rank $SLURM_PROCID of $world on $SLURMD_NODENAME, port $((TC_PORT + SLURM_LOCALID))"
  # shellcheck disable=SC2086  # TC_SERVER_ARGS is a list of options
  exec "$TC_SERVER" -u "$TC_SHARDS" --rank "$SLURM_PROCID" --world "$world" -b "$TC_BATCH" \
    --epochs "$TC_EPOCHS" --epoch-batches "$TC_EPOCH_BATCHES" $TC_SERVER_ARGS "${resume[@]}" \
    "zrpush://$bind:$((TC_PORT + SLURM_LOCALID))"
}

# One trainer rank, with torch.distributed's environment (as torchrun sets it).
tc_train() {
  export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_STEP_NUM_TASKS LOCAL_RANK=$SLURM_LOCALID
  export MASTER_ADDR=$TC_MASTER_ADDR MASTER_PORT=$TC_MASTER_PORT
  exec bash -c "$TC_TRAINER"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run by srun, not sourced
  case "${1:-}" in
    serve) tc_serve ;;
    train) tc_train ;;
    *) tc_fail "unknown task '${1:-}' (expected serve or train)" ;;
  esac
fi
