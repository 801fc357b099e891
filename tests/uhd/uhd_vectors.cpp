// Test vectors from UHD's own converters (libuhd-dev), for tests/uhd_converters.rs.
//
// For each wire format it writes, into the folder given as the only argument:
//   <fmt>.enc_in   fc32 samples (interleaved float I, Q) given to UHD's fc32 -> <fmt>
//   <fmt>.enc_out  UHD's wire bytes for them
//   <fmt>.dec_in   wire bytes covering every bit pattern in turn
//   <fmt>.dec_out  UHD's fc32 for them
// with the scale factors UHD's streamers give the converters: 1/32767 on receive and 32767
// on transmit for sc16; for sc8 the DSP's host scaling with the default peak of 1 moves them
// by 256 (receive 256/32767, transmit 32767/256).
#include <uhd/convert.hpp>
#include <complex>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

static void write(const std::string& path, const void* data, size_t bytes)
{
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

static uhd::convert::converter::sptr make(const std::string& in, const std::string& out)
{
    uhd::convert::id_type id;
    id.input_format  = in;
    id.num_inputs    = 1;
    id.output_format = out;
    id.num_outputs   = 1;
    return uhd::convert::get_converter(id)();
}

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::cerr << "usage: uhd_vectors OUT_DIR\n";
        return 2;
    }
    const std::string dir = argv[1];
    const size_t n        = 8192; // samples, even (sc8 packs two per 32-bit item)
    const char* formats[] = {
        "sc16_item32_be", "sc16_item32_le", "sc8_item32_be", "sc8_item32_le", "sc16_chdr"};
    // Encoder input: a ramp across and beyond full scale, tiny values and exact steps.
    std::vector<std::complex<float>> enc_in(n);
    for (size_t k = 0; k < n; k++) {
        const float x = -1.25f + 2.5f * float(k) / float(n - 1);
        const float y = (k % 7 == 0) ? 1.0f / 32767.0f * float(k % 97) : -x * 0.75f;
        enc_in[k]     = {x, y};
    }
    uint32_t state = 0x12345678u;
    for (const std::string fmt : formats) {
        const size_t bpi = uhd::convert::get_bytes_per_item(fmt);
        std::vector<uint8_t> enc_out(n * bpi);
        const bool sc8 = fmt.rfind("sc8", 0) == 0;
        auto enc = make("fc32", fmt);
        enc->set_scalar(sc8 ? 32767.0 / 256.0 : 32767.0);
        enc->conv({enc_in.data()}, {enc_out.data()}, n);
        write(dir + "/" + fmt + ".enc_in", enc_in.data(), n * sizeof(enc_in[0]));
        write(dir + "/" + fmt + ".enc_out", enc_out.data(), enc_out.size());

        std::vector<uint8_t> dec_in(n * bpi);
        for (size_t k = 0; k < dec_in.size(); k++) {
            // Every byte value in turn, then pseudo-random bytes.
            if (k < 256 * 4) {
                dec_in[k] = uint8_t(k / 4 + (k % 4) * 61);
            } else {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                dec_in[k] = uint8_t(state);
            }
        }
        std::vector<std::complex<float>> dec_out(n);
        auto dec = make(fmt, "fc32");
        dec->set_scalar(sc8 ? 256.0 / 32767.0 : 1.0 / 32767.0);
        dec->conv({dec_in.data()}, {dec_out.data()}, n);
        write(dir + "/" + fmt + ".dec_in", dec_in.data(), dec_in.size());
        write(dir + "/" + fmt + ".dec_out", dec_out.data(), n * sizeof(dec_out[0]));
        std::cout << fmt << " " << bpi << "\n";
    }
    return 0;
}
