// make-shards: pack images into webdataset shards (tar files of KEY.jpg and
// KEY.cls members).
//   make-shards [options] DIR                 an ImageFolder tree DIR/CLASS/*.jpg
//   make-shards [options] --list FILE         lines "PATH LABEL"
//   make-shards [options] --synthetic N       N generated photo-like JPEGs
// Output is byte-identical from run to run for the same input and options.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <clocale>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ordered_jobs.h"
#include "samples.h"
#include "image_rewriter.h"
#include "synthetic_image.h"
#include "tensorcom/transport/brace.h"
#include "tensorcom/codec/atomic_file.h"
#include "tensorcom/codec/error.h"
#include "tensorcom/formats/printable.h"
#include "tensorcom/formats/shard_reader.h"
#include "tensorcom/formats/shard_sequence.h"
#include "tensorcom/formats/shard_writer.h"
#include "tensorcom/formats/tar_encoder.h"
#include "tensorcom/formats/webdataset.h"
#include "tensorcom/imaging/reduce.h"
#include "tensorcom/programs/byte_count.h"
#include "tensorcom/programs/program.h"

namespace po = boost::program_options;
using namespace make_shards;
using namespace tensorcom;
using namespace tensorcom::formats;

namespace {

constexpr const char* kCaption =
    "usage: make-shards [options] DIR | --list FILE | --synthetic N | --from-shards PATTERN\n"
    "Packs an ImageFolder tree (DIR/CLASS/.../*.{jpg,jpeg,png,ppm,bmp,pgm,tif,tiff,webp};\n"
    "label = index of CLASS in sorted order, as torchvision's ImageFolder), a list of 'PATH LABEL' lines, or N "
    "synthetic JPEGs into webdataset\n"
    "shards: members KEY.EXT (the image bytes) and KEY.cls (the label). --from-shards\n"
    "re-packs existing webdataset shards, every member kept (with --restart-markers,\n"
    "JPEGs rewritten)";

constexpr int kMaxSide = 16384;

// Synthetic-only options, refused with the other inputs.
constexpr const char* kSyntheticOnly[] = {"classes", "min-side"};

po::options_description make_options() {
  po::options_description options(kCaption);
  options.add_options()("help,h", "show this help")(
      "output,o", po::value<std::string>()->default_value("shards/imagenet-train-%06d.tar"),
      "shard path pattern with one integer conversion; missing folders are created")(
      "maxcount", po::value<std::uint64_t>()->default_value(1000), "samples per shard at most")(
      "maxsize", po::value<std::string>()->default_value("1e9"),
      "bytes per shard at most (a larger single sample gets a shard of its own); 1e9 style accepted")(
      "list", po::value<std::string>(), "read samples from this list of 'PATH LABEL' lines")(
      "synthetic", po::value<std::uint64_t>(), "generate this many synthetic samples")(
      "from-shards", po::value<std::string>(),
      "re-pack the samples of these tar shards (brace-expanded, in order; paths, file:PATH, pipe:COMMAND or "
      "http(s) URLs), e.g. 'in/train-{0000..0146}.tar'")("shuffle", po::bool_switch(),
                                                         "shuffle the samples (deterministically, by --seed)")(
      "jobs,j", po::value<int>(),
      "threads reading, generating and rewriting images (default: every core); "
      "the output is the same for any number")("seed", po::value<std::uint64_t>()->default_value(0),
                                               "seed of --shuffle and of synthetic images")(
      "mtime", po::value<std::int64_t>()->default_value(0), "modification time of every member (seconds since 1970)")(
      "classes", po::value<std::int64_t>()->default_value(10), "synthetic: number of classes")(
      "min-side", po::value<int>()->default_value(160), "synthetic: smallest image width or height")(
      "max-side", po::value<int>(),
      "JPEGs with a longer side over this are resized (Pillow's antialiased --filter) to have it, and encoded "
      "again at --quality; smaller ones are kept byte for byte (synthetic: the largest width or height drawn, "
      "default 480)")("quality", po::value<int>()->default_value(90),
                      "JPEG quality of --max-side's and synthetic images (1-100)")(
      "filter", po::value<std::string>()->default_value("bicubic"), "--max-side's resampling: bicubic or bilinear")(
      "optimize-huffman", po::bool_switch(),
      "--max-side: Huffman tables made for each image (files a few percent smaller) instead of the standard "
      "tables, which servers build once, not once an image")(
      "max-member-bytes", po::value<std::uint64_t>()->default_value(std::uint64_t{256} << 20),
      "a sample whose image (or, --from-shards, any member) is larger than this is left out unread, with a "
      "warning (as servers skip it)")(
      "restart-markers", po::bool_switch(),
      "rewrite JPEGs losslessly with a restart marker after every MCU (as jpegtran -restart 1B -optimize): "
      "servers then entropy-decode only what their crops need; same pixels, files a few percent larger");
  return options;
}

[[nodiscard]] SyntheticImageOptions synthetic_options(const po::variables_map& vars) {
  SyntheticImageOptions options;
  options.classes = vars["classes"].as<std::int64_t>();
  options.min_side = vars["min-side"].as<int>();
  options.max_side = vars.count("max-side") && vars.count("synthetic") ? vars["max-side"].as<int>() : 480;
  options.quality = vars["quality"].as<int>();
  options.seed = vars["seed"].as<std::uint64_t>();
  if (options.classes <= 0) throw tensorcom::ArgumentError("--classes must be positive");
  if (options.min_side <= 0 || options.min_side > options.max_side || options.max_side > kMaxSide)
    throw tensorcom::ArgumentError("need 0 < --min-side <= --max-side <= " + std::to_string(kMaxSide));
  if (options.quality < 1 || options.quality > 100) throw tensorcom::ArgumentError("--quality must be in 1..100");
  return options;
}

// Throws po::error unless exactly one input is given, and synthetic options
// only with --synthetic.
void check_inputs(const po::variables_map& vars) {
  int inputs =
      static_cast<int>(vars.count("dir") + vars.count("list") + vars.count("synthetic") + vars.count("from-shards"));
  if (inputs != 1) throw po::error("give exactly one of DIR, --list FILE, --synthetic N, --from-shards PATTERN");
  // Shuffling would hold every sample in memory; re-packing streams.
  if (vars.count("from-shards") && vars["shuffle"].as<bool>())
    throw po::error("--shuffle does not apply to --from-shards");
  if (!vars.count("synthetic")) {
    for (const char* name : kSyntheticOnly)
      if (!vars[name].defaulted()) throw po::error(std::string("--") + name + " applies only to --synthetic");
    if (!vars.count("max-side") && !vars["quality"].defaulted())
      throw po::error("--quality applies to --max-side and --synthetic");
  }
  if (!vars.count("max-side") && !vars["filter"].defaulted()) throw po::error("--filter applies to --max-side");
  if ((!vars.count("max-side") || vars.count("synthetic")) && vars["optimize-huffman"].as<bool>())
    throw po::error("--optimize-huffman applies to --max-side");
}

// --max-side's reduction, for inputs other than --synthetic; nothing without it.
[[nodiscard]] std::optional<imaging::ReduceOptions> reduce_options(const po::variables_map& vars) {
  if (!vars.count("max-side") || vars.count("synthetic")) return std::nullopt;
  imaging::ReduceOptions options;
  options.max_side = vars["max-side"].as<int>();
  options.quality = vars["quality"].as<int>();
  options.optimize_huffman = vars["optimize-huffman"].as<bool>();
  const std::string filter = vars["filter"].as<std::string>();
  if (filter == "bicubic") {
    options.filter = imaging::Resample::kBicubic;
  } else if (filter == "bilinear") {
    options.filter = imaging::Resample::kBilinear;
  } else {
    throw tensorcom::ArgumentError("--filter must be bicubic or bilinear, not '" + printable(filter) + "'");
  }
  if (options.max_side < 1 || options.max_side > kMaxSide)
    throw tensorcom::ArgumentError("--max-side must be in 1.." + std::to_string(kMaxSide));
  if (options.quality < 1 || options.quality > 100) throw tensorcom::ArgumentError("--quality must be in 1..100");
  return options;
}

// Refuses, before any shard is written, class names classes.json could not
// hold (a folder named in Latin-1, say): renaming the folder is the fix.
void check_class_names(const std::vector<std::string>& classes) {
  for (const std::string& name : classes) {
    if (!is_utf8(name)) {
      throw tensorcom::ArgumentError("class folder " + printable(name) +
                                     " is not named in UTF-8, which classes.json needs: rename it");
    }
  }
}

// Writes classes.json beside the shards: the class names as a JSON array,
// label i naming classes[i] (what `tensorshow -C` and Python's json read).
void write_class_names(const std::vector<std::string>& classes, const ShardPattern& pattern) {
  const std::filesystem::path path = std::filesystem::path(pattern.format(0)).parent_path() / "classes.json";
  // Staged and renamed: an existing classes.json is replaced whole or kept.
  const std::string text = nlohmann::json(classes).dump() + '\n';
  tensorcom::write_file_atomically(path, std::as_bytes(std::span(text)));
  std::cout << "class names: " << path.string() << " (" << classes.size() << " classes)\n";
}

// The samples the command line asks for, checked and in writing order; an
// ImageFolder tree's class names go to *classes.
[[nodiscard]] std::vector<Sample> select_samples(const po::variables_map& vars, std::vector<std::string>* classes) {
  std::vector<Sample> samples;
  std::string source;
  if (vars.count("dir")) {
    source = vars["dir"].as<std::string>();
    FolderSamples folder = scan_image_folder(source);
    samples = std::move(folder.samples);
    *classes = std::move(folder.classes);
  } else if (vars.count("list")) {
    source = vars["list"].as<std::string>();
    samples = read_list_file(source);
  } else {
    source = "--synthetic " + std::to_string(vars["synthetic"].as<std::uint64_t>());
    samples = synthetic_samples(vars["synthetic"].as<std::uint64_t>(), synthetic_options(vars).classes);
  }
  if (samples.empty()) throw tensorcom::ArgumentError("no samples in " + source);
  check_unique_keys(samples);
  if (vars["shuffle"].as<bool>()) shuffle_samples(samples, vars["seed"].as<std::uint64_t>());
  return samples;
}

// --jobs, or every core.
[[nodiscard]] unsigned job_count(const po::variables_map& vars) {
  if (!vars.count("jobs")) return std::max(1u, std::thread::hardware_concurrency());
  const int jobs = vars["jobs"].as<int>();
  if (jobs < 1 || jobs > 1024) throw tensorcom::ArgumentError("--jobs must be in 1..1024");
  return static_cast<unsigned>(jobs);
}

[[nodiscard]] ShardLimits shard_limits(const po::variables_map& vars) {
  ShardLimits limits;
  limits.max_count = vars["maxcount"].as<std::uint64_t>();
  limits.max_bytes = tensorcom::programs::parse_byte_count(vars["maxsize"].as<std::string>(), "--maxsize");
  if (limits.max_count == 0) throw tensorcom::ArgumentError("--maxcount must be positive");
  return limits;
}

// The image bytes of a sample, read or generated; nothing for a file over
// max_bytes, which is left unread.
[[nodiscard]] std::optional<ByteBuffer> image_bytes(const Sample& sample, const SyntheticImageOptions& synthetic,
                                                    std::uint64_t max_bytes) {
  if (sample.file.empty()) return synthetic_jpeg(sample.index, sample.label, synthetic);
  tensorcom::formats::FileContents contents = read_file(sample.file, max_bytes);
  if (contents.over_limit) return std::nullopt;
  return std::move(contents.bytes);
}

// Counts a JPEG left without restart markers, with a warning naming it.
void report_unchanged(const std::string& what, const std::string& why, std::uint64_t& count) {
  std::cerr << "make-shards: " << printable(what) << ": packed unchanged: " << printable(why) << '\n';
  ++count;
}

// What re-packing met besides good samples.
struct RepackCounts {
  std::uint64_t unreadable_jpegs = 0;
  std::uint64_t skipped_members = 0;
  std::uint64_t oversized_samples = 0;
  std::uint64_t damaged_shards = 0;
};

// One sample of an input shard on its way through run_in_order.
struct RepackItem {
  std::string shard;
  std::vector<ShardMember> members;
  std::vector<std::optional<std::string>> unchanged;  // per member: why it kept no restart markers
};

// --from-shards: every sample of every shard, in order, members unchanged
// but for JPEGs given restart markers when asked (on `jobs` threads).
RepackCounts repack_shards(const std::string& pattern, std::uint64_t max_member_bytes, ImageRewriter& rewriter,
                           unsigned jobs, TarEncoder& encoder, ShardWriter& writer) {
  ShardReaderOptions options;
  options.max_member_bytes = max_member_bytes;
  ShardSequence shards(tensorcom::brace_expand(pattern), options,
                       [](std::string_view line) { std::cerr << "make-shards: " << line << '\n'; });
  std::uint64_t unreadable_jpegs = 0;
  run_in_order<RepackItem>(
      jobs,
      [&]() -> std::optional<RepackItem> {
        auto sample = shards.next();
        if (!sample) return std::nullopt;
        return RepackItem{std::move(sample->shard), std::move(sample->members), {}};
      },
      [&](RepackItem& item) {
        item.unchanged = rewriter.changes_anything() ? rewriter.rewrite(item.members)
                                                     : std::vector<std::optional<std::string>>(item.members.size());
      },
      [&](const RepackItem& item) {
        std::vector<TarMember> members;
        for (std::size_t i = 0; i < item.members.size(); ++i) {
          const ShardMember& m = item.members[i];
          if (item.unchanged[i]) report_unchanged(item.shard + ": " + m.name, *item.unchanged[i], unreadable_jpegs);
          members.push_back({m.name, m.data});
        }
        writer.add(encoder.encode(members));
      });
  const ShardSequence::Counts& passed_over = shards.counts();
  return {unreadable_jpegs, passed_over.skipped_members, passed_over.oversized_samples, passed_over.damaged_shards};
}

void print_summary(const std::vector<ShardSummary>& shards) {
  std::uint64_t samples = 0;
  std::uint64_t bytes = 0;
  for (const ShardSummary& shard : shards) {
    std::cout << shard.path << ": " << shard.samples << " samples, " << shard.bytes << " bytes\n";
    samples += shard.samples;
    bytes += shard.bytes;
  }
  std::cout << "total: " << samples << " samples, " << bytes << " bytes in " << shards.size() << " shards\n";
}

// --max-side's line: how many images it reduced, their bytes before and
// after, and the rate of one job thread.
void print_reductions(const ImageRewriter& rewriter) {
  const ImageRewriter::Reductions r = rewriter.reductions();
  if (r.images == 0) return;
  std::cout << "reduced " << r.images << " JPEGs: " << r.bytes_in << " bytes in, " << r.bytes_out << " bytes out ("
            << (100.0 * static_cast<double>(r.bytes_out) / static_cast<double>(r.bytes_in)) << "%), "
            << (r.seconds > 0 ? static_cast<double>(r.images) / r.seconds : 0.0) << " photos/s on one job thread\n";
}

// The packing run's shared parts: what every input mode writes with.
struct Packer {
  TarEncoder encoder;
  ShardWriter writer;
  ImageRewriter rewriter;
  unsigned jobs;
  std::uint64_t max_image_bytes;  // --max-member-bytes: larger images are left out
};

// --from-shards: re-packs shards. Returns the exit status.
int repack(const po::variables_map& vars, Packer& p) {
  RepackCounts counts =
      repack_shards(vars["from-shards"].as<std::string>(), vars["max-member-bytes"].as<std::uint64_t>(), p.rewriter,
                    p.jobs, p.encoder, p.writer);
  print_summary(p.writer.finish());
  print_reductions(p.rewriter);
  if (counts.unreadable_jpegs) std::cout << "JPEGs packed unchanged (unreadable): " << counts.unreadable_jpegs << '\n';
  if (counts.skipped_members)
    std::cout << "members passed over (not files, or no key): " << counts.skipped_members << '\n';
  if (counts.oversized_samples)
    std::cout << "samples left out (a member over --max-member-bytes): " << counts.oversized_samples << '\n';
  if (counts.damaged_shards) std::cout << "input shards that ended early: " << counts.damaged_shards << '\n';
  return counts.damaged_shards ? 1 : 0;
}

// What packing met besides good samples.
struct PackCounts {
  std::uint64_t unreadable_jpegs = 0;  // packed without restart markers
  std::uint64_t oversized_images = 0;  // left out
};

// An ImageFolder tree, a list or synthetic images: each sample's image
// read (or drawn) and rewritten on the job threads, written in order.
PackCounts pack_samples(const std::vector<Sample>& samples, const SyntheticImageOptions& synthetic, Packer& p) {
  PackCounts counts;
  struct Item {
    const Sample* sample;
    std::optional<ByteBuffer> image;       // nothing: over --max-member-bytes
    std::optional<std::string> unchanged;  // why it kept no restart markers
  };
  std::size_t next = 0;
  auto read = [&]() -> std::optional<Item> {
    if (next == samples.size()) return std::nullopt;
    return Item{&samples[next++], {}, {}};
  };
  run_in_order<Item>(
      p.jobs, read,
      [&](Item& item) {
        item.image = image_bytes(*item.sample, synthetic, p.max_image_bytes);
        if (item.image && p.rewriter.changes_anything()) item.unchanged = p.rewriter.rewrite(*item.image);
      },
      [&](const Item& item) {
        const Sample& sample = *item.sample;
        if (!item.image) {
          std::cerr << "make-shards: " << printable(describe(sample)) << ": left out: larger than " << p.max_image_bytes
                    << " bytes (--max-member-bytes)\n";
          ++counts.oversized_images;
          return;
        }
        if (item.unchanged) report_unchanged(describe(sample), *item.unchanged, counts.unreadable_jpegs);
        std::string label = std::to_string(sample.label);
        const TarMember members[] = {
            {sample.key + "." + sample.extension, *item.image},
            {sample.key + ".cls", std::as_bytes(std::span(label))},
        };
        p.writer.add(p.encoder.encode(members));
      });
  return counts;
}

// Parses the command line; nothing when usage was printed (*status says
// with what status).
std::optional<po::variables_map> parse_command_line(int argc, char** argv, int* status) {
  po::options_description options = make_options();
  po::options_description all(options);
  all.add_options()("dir", po::value<std::string>(), "ImageFolder root");
  po::positional_options_description positional;
  positional.add("dir", 1);
  po::variables_map vars;
  po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vars);
  po::notify(vars);
  if (vars.count("help")) {
    *status = programs::print_usage(options, true);
    return std::nullopt;
  }
  if (!vars.count("dir") && !vars.count("list") && !vars.count("synthetic") && !vars.count("from-shards")) {
    *status = programs::print_usage(options, false);
    return std::nullopt;
  }
  return vars;
}

int run(int argc, char** argv) {
  int status = 0;
  const auto parsed = parse_command_line(argc, argv, &status);
  if (!parsed) return status;
  const po::variables_map& vars = *parsed;
  // Everything that can be refused is checked before the first shard exists,
  // but for input files that turn out unreadable.
  check_inputs(vars);
  ShardPattern pattern(vars["output"].as<std::string>());
  ShardLimits limits = shard_limits(vars);
  SyntheticImageOptions synthetic = synthetic_options(vars);
  Packer packer{TarEncoder(vars["mtime"].as<std::int64_t>()), ShardWriter(std::move(pattern), limits),
                ImageRewriter(reduce_options(vars), vars["restart-markers"].as<bool>()), job_count(vars),
                vars["max-member-bytes"].as<std::uint64_t>()};
  if (vars.count("from-shards")) return repack(vars, packer);

  std::vector<std::string> classes;
  const std::vector<Sample> samples = select_samples(vars, &classes);
  check_class_names(classes);
  const PackCounts counts = pack_samples(samples, synthetic, packer);
  print_summary(packer.writer.finish());
  print_reductions(packer.rewriter);
  if (counts.unreadable_jpegs) std::cout << "JPEGs packed unchanged (unreadable): " << counts.unreadable_jpegs << '\n';
  if (counts.oversized_images)
    std::cout << "images left out (larger than --max-member-bytes): " << counts.oversized_images << '\n';
  if (!classes.empty()) write_class_names(classes, ShardPattern(vars["output"].as<std::string>()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // libarchive writes pax path records in UTF-8 by converting from the locale's
  // charset; under the default "C" locale it would mark every non-ASCII name
  // hdrcharset=BINARY instead. File names here are taken to be UTF-8.
  std::setlocale(LC_CTYPE, "C.UTF-8");
  return programs::program_main("make-shards", [&] { return run(argc, argv); });
}
