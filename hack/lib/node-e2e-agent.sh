# shellcheck shell=bash
# The node agent of hack/node-conformance.sh, started and stopped the same
# way by that script and by the node e2e suite through the systemctl shim
# (hack/lib/node-e2e-bin/systemctl): the suite stops, restarts and
# reconfigures "the kubelet" with `sudo systemctl` (test/e2e_node/util.go
# restartKubelet, mustStopKubelet; util_kubeletconfig.go
# updateKubeletConfig). Sourced; the caller defines nothing but AGENT_DIR.
#
# State, in the run's results directory AGENT_DIR (the shim finds it in
# NODE_E2E_AGENT_DIR):
#   agent.conf    how to start the agent (agent_configure): NODE_AGENT, its
#                 environment, its arguments, its settings arguments, the
#                 suite's working directory
#   agent.pid     the PID of the current agent and its start time (field 22
#                 of /proc/PID/stat: a PID used again is not the agent);
#                 absent when none was started or it was stopped
#   agent.starts  how many times an agent was started
#   agent.log     every agent's output, appended, each start and stop after
#                 a line "node-e2e-agent: ..."
#   agent.lock    serialises starting and stopping (flock)
#
# Starting: hack/run-<agent>.sh with agent.conf's environment and
# arguments, then its settings arguments (hack/node-conformance.sh: the
# drop-in directory agent-config.d and crivk's flags repeating it), in the
# background, in a session of its own, its output appended to agent.log and
# nothing else inherited: it outlives the shim that starts it, and the
# suite (which waits for the shim's output) does not wait for it. Both
# scripts exec the agent: the PID started is the agent's.
#
# With the suite's configuration: once the suite has written kubelet-config
# into its working directory (updateKubeletConfig: the whole configuration
# read from /configz, changed), every start runs the agent as the suite's
# own kubelet runs (test/e2e_node/services/kubelet.go):
# --config=<that file> and --config-dir=<the suite's kubelet.conf.d> (empty
# unless a spec writes a drop-in), and WITHOUT the settings arguments,
# which would override the file (a flag beats --config, a drop-in beats
# it too); for crivk, CRIVK_SETTINGS_FROM_CONFIG=1 makes hack/run-crivk.sh
# leave out its own settings flags for the same reason. run-kubelet.sh's
# own --config comes first: the later one wins.

# agent_configure AGENT SUITE_DIR: writes AGENT_DIR/agent.conf from the
# arrays agent_env (NAME=VALUE), agent_args and agent_settings, and starts
# the count of starts.
agent_configure() {
  local NODE_AGENT=$1 SUITE_DIR=$2
  declare -p NODE_AGENT SUITE_DIR agent_env agent_args agent_settings >"${AGENT_DIR}/agent.conf"
  echo 0 >"${AGENT_DIR}/agent.starts"
}

# agent_note MESSAGE: a line in agent.log and on stderr.
agent_note() {
  echo "node-e2e-agent: $(date -u +%H:%M:%S) $*" | tee -a "${AGENT_DIR}/agent.log" >&2
}

# proc_stat PID: /proc/PID/stat from its field 3 (the state) on.
proc_stat() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null; }

# agent_pid: prints the current agent's PID and returns 0 when it runs
# (a zombie does not).
agent_pid() {
  local pid started stat
  read -r pid started 2>/dev/null <"${AGENT_DIR}/agent.pid" || return 1
  stat=$(proc_stat "${pid}") || return 1
  read -r -a stat <<<"${stat}"
  [ "${stat[0]}" != Z ] && [ "${stat[19]}" = "${started}" ] || return 1
  echo "${pid}"
}

# agent_start WHY: starts the agent (none must run) and writes agent.pid.
agent_start() {
  local -a agent_env agent_args agent_settings args
  local NODE_AGENT SUITE_DIR root starts pid stat
  # shellcheck source=/dev/null
  source "${AGENT_DIR}/agent.conf"
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  args=("${agent_args[@]}")
  if [ -f "${SUITE_DIR}/kubelet-config" ]; then
    args+=(--config="${SUITE_DIR}/kubelet-config")
    [ ! -d "${SUITE_DIR}/kubelet.conf.d" ] || args+=(--config-dir="${SUITE_DIR}/kubelet.conf.d")
    agent_env+=(CRIVK_SETTINGS_FROM_CONFIG=1)
  else
    args+=("${agent_settings[@]}")
  fi
  starts=$(($(cat "${AGENT_DIR}/agent.starts") + 1))
  echo "${starts}" >"${AGENT_DIR}/agent.starts"
  agent_note "start ${starts} ($1): ${agent_env[*]} hack/run-${NODE_AGENT}.sh ${args[*]}"
  setsid env "${agent_env[@]}" "${root}/hack/run-${NODE_AGENT}.sh" "${args[@]}" \
    </dev/null >>"${AGENT_DIR}/agent.log" 2>&1 9>&- &
  pid=$!
  stat=$(proc_stat "${pid}") || true
  read -r -a stat <<<"${stat}"
  echo "${pid} ${stat[19]:-}" >"${AGENT_DIR}/agent.pid"
}

# agent_stop WHY [--no-wait]: SIGTERM to the current agent, if it runs;
# then waits up to 30 s for it to exit and SIGKILLs it if it has not (with
# --no-wait, only the SIGTERM, as `systemctl kill`). Removes agent.pid once
# the agent is gone.
agent_stop() {
  local pid
  if ! pid=$(agent_pid); then
    rm -f "${AGENT_DIR}/agent.pid"
    return 0
  fi
  agent_note "stop ($1): SIGTERM to ${pid}"
  kill -TERM "${pid}" 2>/dev/null || true
  [ "${2:-}" != --no-wait ] || return 0
  for _ in $(seq 1 300); do
    agent_pid >/dev/null || break
    sleep 0.1
  done
  if agent_pid >/dev/null; then
    agent_note "stop ($1): ${pid} still runs after 30 s: SIGKILL"
    kill -KILL "${pid}" 2>/dev/null || true
    for _ in $(seq 1 50); do
      agent_pid >/dev/null || break
      sleep 0.1
    done
  fi
  # Reaps it when it is this shell's child (the first start); else its
  # parent, PID 1, does.
  wait "${pid}" 2>/dev/null || true
  rm -f "${AGENT_DIR}/agent.pid"
}

# agent_locked COMMAND...: runs COMMAND holding agent.lock.
agent_locked() {
  {
    flock 9
    "$@"
  } 9>>"${AGENT_DIR}/agent.lock"
}
