// Reads CHDR datagrams' first 16 bytes (hex, one datagram a line) and prints what UHD's own
// CHDR header class makes of them: "<eob> <seq> <length> <has_time> <timestamp>" a line.
// The timestamp is the 64-bit word after the header when UHD says the packet type carries
// one (CHDR_W = 64, as UHD's remote streaming sends).
#include <uhd/rfnoc/chdr_types.hpp>
#include <cstdint>
#include <iostream>
#include <string>

static uint64_t le64(const std::string& hex, size_t at)
{
    uint64_t v = 0;
    for (int b = 7; b >= 0; --b) {
        v = (v << 8) | std::stoul(hex.substr(at + 2 * b, 2), nullptr, 16);
    }
    return v;
}

int main()
{
    using namespace uhd::rfnoc::chdr;
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.size() < 32) {
            return 1;
        }
        const chdr_header h(le64(line, 0));
        const bool timed = h.get_pkt_type() == PKT_TYPE_DATA_WITH_TS;
        std::cout << (h.get_eob() ? 1 : 0) << ' ' << h.get_seq_num() << ' ' << h.get_length()
                  << ' ' << (timed ? 1 : 0) << ' ' << (timed ? le64(line, 16) : 0) << '\n';
    }
    return 0;
}
