#!/bin/sh
# LTTng session settings for fsdr-net latency measurements (see README.md beside this file).
#
#   tracing/session.sh start NAME OUTPUT_DIR   create the session, enable the events, start
#   tracing/session.sh stop NAME               stop, print the discarded-event count, destroy
#
# The traced program must start with LTTNG_UST_ALLOW_BLOCKING=1 in its environment, or the
# blocking channel falls back to discarding events when its buffers are full.
set -eu

# Per-CPU ring buffers of 8 × 1 MiB: at 32 bytes per event and the default granularity this
# holds seconds of events; the blocking timeout makes a full buffer wait instead of discard.
SUBBUF_SIZE=${FSDR_NET_SUBBUF_SIZE:-1M}
NUM_SUBBUF=${FSDR_NET_NUM_SUBBUF:-8}

case "${1:-}" in
start)
    name=$2
    out=$3
    pgrep -x lttng-sessiond >/dev/null || lttng-sessiond --daemonize
    lttng create "$name" --output="$out" >/dev/null
    lttng enable-channel --userspace --session="$name" \
        --subbuf-size="$SUBBUF_SIZE" --num-subbuf="$NUM_SUBBUF" \
        --blocking-timeout=inf fsdr >/dev/null
    lttng enable-event --userspace --session="$name" --channel=fsdr 'fsdr_net:*' >/dev/null
    lttng start "$name" >/dev/null
    echo "lttng session $name recording fsdr_net:* into $out"
    ;;
stop)
    name=$2
    lttng stop "$name" >/dev/null
    # "Discarded events: N" appears in the channel listing when the tracer dropped any.
    lttng list "$name" | grep -i "discarded" || echo "discarded events: 0"
    lttng destroy "$name" >/dev/null
    ;;
*)
    echo "usage: $0 start NAME OUTPUT_DIR | stop NAME" >&2
    exit 2
    ;;
esac
