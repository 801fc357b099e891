// Reads whole VRT datagrams (hex, one datagram a line) and prints what UHD's own VRT
// unpacker (uhd::transport::vrt::if_hdr_unpack_be, libuhd) makes of them, a line each:
// "<eob> <packet_count> <payload_bytes> <has_tsf> <tsf> <has_trailer>".
#include <uhd/transport/vrt_if_packet.hpp>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

int main()
{
    using namespace uhd::transport;
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.size() % 8 != 0 || line.empty()) {
            return 1;
        }
        // The words as they are on the wire (big-endian), in memory order.
        std::vector<uint32_t> words(line.size() / 8);
        std::vector<uint8_t> bytes(line.size() / 2);
        for (size_t i = 0; i < bytes.size(); ++i) {
            bytes[i] = static_cast<uint8_t>(std::stoul(line.substr(2 * i, 2), nullptr, 16));
        }
        std::memcpy(words.data(), bytes.data(), bytes.size());
        vrt::if_packet_info_t info;
        info.num_packet_words32 = words.size();
        try {
            vrt::if_hdr_unpack_be(words.data(), info);
        } catch (const std::exception& e) {
            std::cerr << e.what() << '\n';
            return 2;
        }
        std::cout << (info.eob ? 1 : 0) << ' ' << info.packet_count << ' '
                  << info.num_payload_bytes << ' ' << (info.has_tsf ? 1 : 0) << ' '
                  << info.tsf << ' ' << (info.has_tlr ? 1 : 0) << '\n';
    }
    return 0;
}
