// tenbin: inspect, check, concatenate, salvage and record .ten files.
//   tenbin info FILE.ten...               one line per tensor
//   tenbin check [--salvage] FILE.ten...  exit 1 with the reason if any is invalid
//   tenbin cat [--salvage] FILE.ten... [-o OUT.ten]  re-encode (to stdout without -o)
//   tenbin record URL... -n N -o OUT.ten  record N received batches
//   tenbin synth -b B -s S -n N -o OUT.ten  synthetic [images, labels] batches
//   tenbin keygen NAME                    a CURVE key pair: NAME and NAME_secret
#include <boost/program_options.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tensorcom/transport/connection.h"
#include "tensorcom/transport/curve.h"
#include "tensorcom/formats/printable.h"
#include "tensorcom/codec/ten_file.h"
#include "tensorcom/codec/ten_writer.h"
#include "tensorcom/programs/program.h"

namespace po = boost::program_options;
using namespace tensorcom;

namespace {

constexpr const char* kUsage =
    "usage: tenbin COMMAND [options] ARGS...\n"
    "commands:\n"
    "  info FILE.ten...               list index, tensor index, dtype, shape, info, payload bytes\n"
    "  check FILE.ten...              exit 0 if every file is valid, else 1 with the reason and offset\n"
    "        --salvage                also say how many whole lists a damaged file holds and where it is cut\n"
    "  cat FILE.ten... [-o OUT.ten]   re-encode the lists into one file (stdout without -o)\n"
    "        --salvage                copy only the whole lists before any damage (recovers a cut recording)\n"
    "  record URL... -n N -o OUT.ten  record N batches received from URLs (to a temporary file, renamed\n"
    "                                 to OUT.ten on SIGINT, SIGTERM or the count reached)\n"
    "  synth -b B -s S -n N -o OUT.ten  write N batches of random uint8 (B,S,S,3) images and int32 (B,) labels\n"
    "  keygen NAME                    write a CURVE key pair: NAME (public) and NAME_secret (mode 0600)\n";

struct Parsed {
  po::variables_map vars;
  std::vector<std::string> args;
};

// Parses a subcommand's options; positional arguments go to args.
Parsed parse(const po::options_description& options, const std::vector<std::string>& argv) {
  po::options_description all(options);
  all.add_options()("args", po::value<std::vector<std::string>>(), "positional arguments");
  po::positional_options_description positional;
  positional.add("args", -1);
  Parsed parsed;
  po::store(po::command_line_parser(argv).options(all).positional(positional).run(), parsed.vars);
  po::notify(parsed.vars);
  if (parsed.vars.count("args")) parsed.args = parsed.vars["args"].as<std::vector<std::string>>();
  return parsed;
}

po::options_description list_options(const char* caption) {
  po::options_description options(caption);
  options.add_options()("help,h", "show this help")(
      "group,g", po::value<std::size_t>()->default_value(kInferListLength),
      "tensors per list in files of several lists (0: infer from the tensors)");
  return options;
}

int run_info(const std::vector<std::string>& argv) {
  auto options = list_options("tenbin info FILE.ten...");
  Parsed p = parse(options, argv);
  if (p.vars.count("help") || p.args.empty()) return programs::print_usage(options, p.vars.count("help"));
  bool several = p.args.size() > 1;
  for (const std::string& file : p.args) {
    TenListReader reader(file, p.vars["group"].as<std::size_t>());
    for (std::uint64_t l = 0; auto list = reader.next(); ++l) {
      for (std::size_t t = 0; t < list->size(); ++t) {
        const Tensor& tensor = (*list)[t];
        if (several) std::cout << file << '\t';
        std::cout << l << '\t' << t << '\t' << dtype_code(tensor.dtype()) << '\t' << format_shape(tensor.shape())
                  << '\t' << formats::printable(tensor.info()) << '\t' << tensor.nbytes() << '\n';
      }
    }
  }
  return 0;
}

// One line of check --salvage: what a damaged file still holds. Returns
// whether the file is intact.
bool report_salvage(const std::string& file, std::size_t group) {
  SalvageReport r = salvage_ten(file, group, [](TensorList&&) {});
  if (r.intact()) {
    std::cout << file << ": ok, " << r.tensors << " tensors in " << r.lists << " lists\n";
    return true;
  }
  std::cout << file << ": damaged: " << r.lists << " whole lists (" << r.tensors << " tensors, "
            << (r.list_length ? "lists of " + std::to_string(r.list_length)
                              : std::string("list length unknown: give -g"))
            << ") in the first " << r.whole_bytes << " of " << r.file_bytes << " bytes";
  if (r.lost_tensors) std::cout << "; " << r.lost_tensors << " tensors after them are not a whole list";
  if (r.damage) std::cout << "; damaged at byte " << r.damage->offset() << ": " << r.damage->message();
  std::cout << "\n";
  return false;
}

int run_check(const std::vector<std::string>& argv) {
  auto options = list_options("tenbin check [--salvage] FILE.ten...");
  options.add_options()(
      "salvage", po::bool_switch(),
      "for a damaged file, say how many whole lists precede the damage (tenbin cat --salvage copies them)");
  Parsed p = parse(options, argv);
  if (p.vars.count("help") || p.args.empty()) return programs::print_usage(options, p.vars.count("help"));
  const std::size_t group = p.vars["group"].as<std::size_t>();
  int status = 0;
  for (const std::string& file : p.args) {
    try {
      if (p.vars["salvage"].as<bool>()) {
        if (!report_salvage(file, group)) status = 1;
        continue;
      }
      TenListReader reader(file, group);
      std::size_t tensors = 0;
      while (auto list = reader.next()) tensors += list->size();
      std::cout << file << ": ok, " << tensors << " tensors in " << reader.lists_read() << " lists\n";
    } catch (const Error& e) {
      // The readers' messages already start with the file name.
      std::cerr << "tenbin check: " << e.what() << '\n';
      status = 1;
    }
  }
  return status;
}

// Copies the lists of one file; with salvage only the whole lists before any
// damage, saying on stderr what was left out.
void copy_lists(const std::string& file, std::size_t group, bool salvage, TenWriter& writer) {
  if (!salvage) {
    TenListReader reader(file, group);
    while (auto list = reader.next()) writer.write(*list);
    return;
  }
  SalvageReport r = salvage_ten(file, group, [&](TensorList&& list) { writer.write(list); });
  if (r.intact()) return;
  std::cerr << "tenbin cat: " << file << ": copied " << r.lists << " whole lists (" << r.tensors << " tensors, "
            << r.whole_bytes << " of " << r.file_bytes << " bytes)";
  if (r.lost_tensors) std::cerr << "; left out " << r.lost_tensors << " tensors of a list cut short";
  if (r.damage) std::cerr << "; " << r.damage->what();
  std::cerr << '\n';
}

int run_cat(const std::vector<std::string>& argv) {
  auto options = list_options("tenbin cat [--salvage] FILE.ten... [-o OUT.ten]");
  options.add_options()("output,o", po::value<std::string>()->default_value("-"), "output file, - for stdout")(
      "salvage", po::bool_switch(), "copy only the whole lists before any damage (a file cut by a crash)");
  Parsed p = parse(options, argv);
  if (p.vars.count("help") || p.args.empty()) return programs::print_usage(options, p.vars.count("help"));
  std::string output = p.vars["output"].as<std::string>();
  // A file appears whole or not at all: an input found bad halfway leaves
  // OUT.ten as it was.
  TenWriter writer = output == "-" ? TenWriter("/dev/stdout") : TenWriter(output, TenWriter::Mode::kReplace);
  try {
    for (const std::string& file : p.args) {
      copy_lists(file, p.vars["group"].as<std::size_t>(), p.vars["salvage"].as<bool>(), writer);
    }
    writer.close();
  } catch (...) {
    writer.discard();
    throw;
  }
  return 0;
}

// Receives into writer until the count is reached; returns false if a stop
// signal ended the recording first.
bool record_batches(Connection& connection, TenWriter& writer) {
  try {
    for (const TensorList& batch : connection) {
      writer.write(batch);
      if (programs::stop_requested()) return false;
    }
    return true;
  } catch (const TransportError& e) {
    if (e.code() == EINTR && programs::stop_requested()) return false;
    throw;
  }
}

int run_record(const std::vector<std::string>& argv) {
  po::options_description options("tenbin record URL... -n N -o OUT.ten");
  options.add_options()("help,h", "show this help")("count,n", po::value<std::uint64_t>()->required(),
                                                    "batches to record")(
      "output,o", po::value<std::string>()->required(), "output .ten file")(
      "timeout,t", po::value<double>()->default_value(30), "seconds to wait for each batch before giving up")(
      "strict", "fail when one stream (--meta) comes from two servers at once, instead of warning");
  Parsed p = parse(options, argv);
  if (p.vars.count("help") || p.args.empty()) return programs::print_usage(options, p.vars.count("help"));
  ConnectionOptions connection_options;
  connection_options.refuse_duplicate_streams = p.vars.count("strict") > 0;
  connection_options.timeout = Milliseconds(static_cast<std::int64_t>(p.vars["timeout"].as<double>() * 1000));
  connection_options.total = static_cast<std::int64_t>(p.vars["count"].as<std::uint64_t>());
  connection_options.decompress_threads = 0;  // batches are recorded as they came, compressed images too
  const std::string output = p.vars["output"].as<std::string>();
  programs::install_stop_handlers();
  programs::refuse_inproc(p.args);
  Connection connection(p.args, connection_options);
  // Written beside OUT.ten and renamed when done: a crash leaves the
  // temporary file, whose whole batches `tenbin cat --salvage` recovers.
  TenWriter writer(output, TenWriter::Mode::kReplace);
  const std::string temporary = writer.temporary_path().string();
  std::cerr << "tenbin record: writing " << temporary << ", renamed to " << output << " when done" << std::endl;
  bool completed = false;
  try {
    completed = record_batches(connection, writer);
    writer.close();
  } catch (const Error& e) {
    if (writer.bytes_written() == 0) {
      writer.discard();
      throw;
    }
    throw Error(std::string(e.what()) + "; the batches recorded so far are in " + temporary +
                " (recover them with: tenbin cat --salvage " + temporary + " -o " + output + ")");
  }
  const Statistics& stats = connection.stats();
  std::cerr << "tenbin record: " << stats.batches() << " batches, " << stats.samples() << " samples, " << stats.bytes()
            << " bytes";
  if (connection.malformed().total()) std::cerr << ", skipped " << connection.malformed().total() << " malformed";
  if (!completed) std::cerr << ", stopped by a signal";
  std::cerr << '\n';
  return completed ? 0 : programs::kExitInterrupted;
}

// Fills bytes with a cheap pseudo-random stream (xorshift64), so batches are
// not trivially compressible and not all alike.
void fill_random(std::span<std::byte> bytes, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(bytes.data() + i, &x, 8);
  }
  for (; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(x >> (8 * (i % 8)));
}

// synth's bounds: a batch of at most 8 GiB, a file of at most 10^9 of them.
constexpr std::int64_t kMostSynthBatch = 65536, kMostSynthSize = 8192, kMostSynthCount = 1000000000;

int run_synth(const std::vector<std::string>& argv) {
  po::options_description options("tenbin synth -b B -s S -n N -o OUT.ten");
  options.add_options()("help,h", "show this help")("batch,b", po::value<std::int64_t>()->default_value(32),
                                                    "images per batch")(
      "size,s", po::value<std::int64_t>()->default_value(224), "image height and width")(
      "count,n", po::value<std::int64_t>()->default_value(1), "batches (1 to 10^9)")(
      "classes", po::value<std::int32_t>()->default_value(1000), "labels are 0..classes-1")(
      "output,o", po::value<std::string>()->required(), "output .ten file");
  Parsed p = parse(options, argv);
  if (p.vars.count("help")) return programs::print_usage(options, true);
  auto b = p.vars["batch"].as<std::int64_t>();
  auto s = p.vars["size"].as<std::int64_t>();
  auto classes = p.vars["classes"].as<std::int32_t>();
  const auto count = p.vars["count"].as<std::int64_t>();
  if (b <= 0 || b > kMostSynthBatch) throw ArgumentError("-b/--batch must be in 1.." + std::to_string(kMostSynthBatch));
  if (s <= 0 || s > kMostSynthSize) throw ArgumentError("-s/--size must be in 1.." + std::to_string(kMostSynthSize));
  if (count <= 0 || count > kMostSynthCount)
    throw ArgumentError("-n/--count must be in 1.." + std::to_string(kMostSynthCount));
  if (classes <= 0) throw ArgumentError("--classes must be positive");
  // Written under a temporary name: a stop (or an error) removes it, and
  // nothing incomplete is left under the output's name.
  TenWriter writer(p.vars["output"].as<std::string>(), TenWriter::Mode::kReplace);
  programs::install_stop_handlers();
  for (std::int64_t n = 0; n < count; ++n) {
    if (programs::stop_requested()) {
      writer.discard();
      std::cerr << "tenbin synth: stopped by a signal after " << n << " batches; nothing written\n";
      return 130;
    }
    Tensor images = Tensor::allocate(DType::kUInt8, {b, s, s, 3});
    fill_random(images.bytes(), n);
    Tensor labels = Tensor::allocate(DType::kInt32, {b});
    auto values = labels.values<std::int32_t>();
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<std::int32_t>((n * 7919 + i * 104729) % classes);
    TensorList batch{images, labels};
    try {
      writer.write(batch);
    } catch (...) {
      writer.discard();  // a full disk leaves no partial file behind
      throw;
    }
  }
  writer.close();
  return 0;
}

int run_keygen(const std::vector<std::string>& argv) {
  po::options_description options("tenbin keygen NAME");
  options.add_options()("help,h", "show this help");
  Parsed p = parse(options, argv);
  if (p.vars.count("help") || p.args.size() != 1) return programs::print_usage(options, p.vars.count("help"));
  const CurveKeyPair keys = generate_curve_keypair();
  write_curve_certificates(p.args[0], keys);
  std::cout << "tenbin keygen: wrote " << p.args[0] << " (public key " << keys.public_key << ") and " << p.args[0]
            << "_secret\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return programs::program_main("tenbin", [&]() -> int {
    if (argc < 2) {
      std::cerr << kUsage;
      return 2;
    }
    std::string command = argv[1];
    std::vector<std::string> rest(argv + 2, argv + argc);
    if (command == "info") return run_info(rest);
    if (command == "check") return run_check(rest);
    if (command == "cat") return run_cat(rest);
    if (command == "record") return run_record(rest);
    if (command == "synth") return run_synth(rest);
    if (command == "keygen") return run_keygen(rest);
    if (command == "-h" || command == "--help") {
      std::cout << kUsage;
      return 0;
    }
    std::cerr << "tenbin: unknown command '" << command << "'\n" << kUsage;
    return 2;
  });
}
