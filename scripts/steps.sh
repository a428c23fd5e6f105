# What the setup scripts share (sourced, not run): a line before each step, and a heartbeat for the
# steps that can stay silent for minutes (pip prints nothing while it compiles a wheel).

# Say what comes next, on stderr (stdout stays the commands' own).
step() { echo "setup: $*" >&2; }

# Run "$@" (after the step's name, $1); while it runs, say every minute (FLOWSTATE_SETUP_HEARTBEAT_S)
# how long it has taken. Its exit status is the command's.
with_heartbeat() {
    local what=$1 every=${FLOWSTATE_SETUP_HEARTBEAT_S:-60} status=0 beat
    shift
    (
        started=$SECONDS
        trap 'kill "$pause" 2>/dev/null; exit 0' TERM # its pause too: nothing holds the script's output open
        while true; do
            sleep "$every" &
            pause=$!
            wait "$pause"
            elapsed=$((SECONDS - started))
            step "$what: still running, $((elapsed / 60)) min $((elapsed % 60)) s so far"
        done
    ) &
    beat=$!
    trap 'kill "$beat" 2>/dev/null' EXIT # Ctrl-C or a failure: the heartbeat stops too
    "$@" || status=$?
    kill "$beat" 2>/dev/null
    trap - EXIT
    return "$status"
}
