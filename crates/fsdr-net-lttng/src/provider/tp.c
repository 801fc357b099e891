/* Defines the probes of the `fsdr_net` provider and small functions that Rust calls. */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "tp.h"

void fsdr_net_tp_tx(uint64_t block, uint64_t seq) { lttng_ust_tracepoint(fsdr_net, tx, block, seq); }
void fsdr_net_tp_rx(uint64_t block, uint64_t seq) { lttng_ust_tracepoint(fsdr_net, rx, block, seq); }
void fsdr_net_tp_probe(uint64_t block, uint64_t seq) { lttng_ust_tracepoint(fsdr_net, probe, block, seq); }

void fsdr_net_tp_arrival(uint64_t block, uint64_t seq, uint64_t arrival_ns)
{
    lttng_ust_tracepoint(fsdr_net, arrival, block, seq, arrival_ns);
}

void fsdr_net_tp_packet(uint64_t block, uint64_t seq, uint64_t bytes, uint64_t arrival_ns,
                        uint64_t kernel_ns)
{
    lttng_ust_tracepoint(fsdr_net, packet, block, seq, bytes, arrival_ns, kernel_ns);
}

/* Non-zero while a session records the packet event (lets callers skip preparing fields). */
int fsdr_net_tp_packet_enabled(void) { return lttng_ust_tracepoint_enabled(fsdr_net, packet); }
