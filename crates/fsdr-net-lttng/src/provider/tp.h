/* LTTng-UST tracepoint provider `fsdr_net` (built only with the crate's `lttng` feature). */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER fsdr_net

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./tp.h"

#if !defined(FSDR_NET_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define FSDR_NET_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

/* A mark on one pipe: the `seq`-th granularity boundary of block (pipe) `block`. */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(fsdr_net, mark,
    LTTNG_UST_TP_ARGS(uint64_t, block, uint64_t, seq),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, block, block)
        lttng_ust_field_integer(uint64_t, seq, seq)))

/* A source produced the boundary. */
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(fsdr_net, mark, fsdr_net, tx,
    LTTNG_UST_TP_ARGS(uint64_t, block, uint64_t, seq))
/* A sink consumed the boundary. */
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(fsdr_net, mark, fsdr_net, rx,
    LTTNG_UST_TP_ARGS(uint64_t, block, uint64_t, seq))
/* A pass-through probe saw the boundary go by. */
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(fsdr_net, mark, fsdr_net, probe,
    LTTNG_UST_TP_ARGS(uint64_t, block, uint64_t, seq))

/* UdpSource handed the boundary over; `arrival_ns` is when the receive thread took the
   datagram that carried it from the kernel (CLOCK_MONOTONIC, LTTng's clock). */
LTTNG_UST_TRACEPOINT_EVENT(fsdr_net, arrival,
    LTTNG_UST_TP_ARGS(uint64_t, block, uint64_t, seq, uint64_t, arrival_ns),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, block, block)
        lttng_ust_field_integer(uint64_t, seq, seq)
        lttng_ust_field_integer(uint64_t, arrival_ns, arrival_ns)))

/* UdpSource handed over one datagram: its sequence number (or arrival count), payload bytes,
   receive time (CLOCK_MONOTONIC) and kernel timestamp (CLOCK_REALTIME, 0 when not enabled). */
LTTNG_UST_TRACEPOINT_EVENT(fsdr_net, packet,
    LTTNG_UST_TP_ARGS(uint64_t, block, uint64_t, seq, uint64_t, bytes, uint64_t, arrival_ns,
                      uint64_t, kernel_ns),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, block, block)
        lttng_ust_field_integer(uint64_t, seq, seq)
        lttng_ust_field_integer(uint64_t, bytes, bytes)
        lttng_ust_field_integer(uint64_t, arrival_ns, arrival_ns)
        lttng_ust_field_integer(uint64_t, kernel_ns, kernel_ns)))

#endif /* FSDR_NET_TP_H */

#include <lttng/tracepoint-event.h>
