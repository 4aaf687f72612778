#include "image_server_cli.h"

#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "tensorcom/formats/printable.h"
#include "tensorcom/metrics/metrics_server.h"
#include "tensorcom/programs/program.h"

namespace po = boost::program_options;

namespace tensorcom::pipeline {

namespace {

constexpr std::size_t kMostStreamName = 1024;  // as tensorcom.resume accepts

std::array<float, 3> parse_triple(const std::string& text, const char* name) {
  std::array<float, 3> out{};
  std::istringstream in(text);
  std::string item;
  std::size_t n = 0;
  while (std::getline(in, item, ',')) {
    if (n == 3) break;
    try {
      out[n++] = std::stof(item);
    } catch (const std::exception&) {
      throw ArgumentError(std::string("--") + name + " '" + text + "': not a number: '" + item + "'");
    }
  }
  if (n != 3 || std::getline(in, item))
    throw ArgumentError(std::string("--") + name + " needs three comma-separated values");
  return out;
}

// The largest --size, and size in a --size-schedule: well past any real job.
constexpr int kMostSize = 8192;

// What a bare --shuffle (or shards' -S, the reference's switch) means.
constexpr std::size_t kBareShuffle = 1000;

bool is_count(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

// The arguments after argv[0], a bare shuffle switch followed by something
// other than a count (an address: "-S zpub://...") given its value, which
// the parser would otherwise try to read from that address.
std::vector<std::string> with_bare_shuffle(int argc, char** argv, bool short_switch) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool bare = args[i] == "--shuffle" || (short_switch && args[i] == "-S");
    if (bare && (i + 1 == args.size() || !is_count(args[i + 1]))) args[i] = "--shuffle=" + std::to_string(kBareShuffle);
  }
  return args;
}

// Comma-separated numbers; ArgumentError naming the flag and the form
// expected otherwise.
std::vector<double> parse_numbers(const std::string& text, const char* flag, const char* form) {
  std::vector<double> values;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    char* end = nullptr;
    const double v = std::strtod(part.c_str(), &end);
    if (part.empty() || *end != '\0') {
      throw ArgumentError(std::string(flag) + " '" + formats::printable(text) + "': expected " + form + " (numbers)");
    }
    values.push_back(v);
  }
  return values;
}

}  // namespace

ImageServerCli::ImageServerCli(const char* program, const char* usage, ReferenceFlags reference)
    : options(usage), reference_(reference) {
  server.program = program;
  server.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ImageServerOptions& s = server;
  options.add_options()("help,h", "show this help")("batch,batch-size,b",
                                                    po::value(&s.format.batch_size)->default_value(32),
                                                    "images per batch (also --batch-size, the reference's name)")(
      "workers,w", po::value(&s.workers)->default_value(s.workers), "decoding threads")(
      reference.parallel, po::value(&parallel_)->default_value(0),
      "the reference's processes: here decoding threads, as --workers (0: leave --workers)")(
      "report,r", po::value(&s.report)->default_value(10), "print a rate line every N batches (0: never)")(
      "epochs", po::value(&s.epochs)->default_value(0), "passes over the data, then exit (0: forever)")(
      "epoch-batches", po::value(&s.epoch_batches)->default_value(0),
      "batches per epoch: the share cut to this or read again until it is met, so that every rank gets as many "
      "(0: the share as it is)")("seed", po::value(&s.order.seed),
                                 "seed of every random choice (default: drawn at start and printed, so that servers "
                                 "started alike make different streams; with --resume, the token's; with --world > 1, "
                                 "0, as every rank must deal the shards alike)")(

      "size", po::value(&s.format.size)->default_value(224), "output height and width")(
      "size-schedule", po::value(&size_schedule_),
      "START,END,START_EPOCH,END_EPOCH: training size by epoch, FFCV's progressive resizing: START up to "
      "START_EPOCH, END from END_EPOCH, linear between them rounded to a multiple of 32 (epochs from 0; "
      "instead of --size; not with --val)")(
      "val",
      "validation transform: resize the shorter side (to size*256/224 unless --val-resize or --crop-pct), "
      "centre crop, no flip")(
      "val-resize", po::value(&val_resize_)->default_value(0),
      "--val: resize the shorter side to N, then centre crop --size (torchvision's --val-resize-size)")(
      "crop-pct", po::value(&crop_pct_)->default_value(0),
      "--val: timm's crop_pct, the shorter side resized to floor(size / P), then centre crop --size")(
      "interpolation", po::value(&interpolation_)->default_value("bilinear"),
      "bilinear or bicubic (torchvision's pixels: Pillow's antialiased filters on a full-scale decode), "
      "or fast (DCT-scaled decode, 2-tap bilinear)")(
      "auto-augment", po::value(&auto_augment_),
      "after the crop and flip, torchvision's policy: ta_wide (TrivialAugmentWide), ra (RandAugment) or imagenet "
      "(AutoAugment's ImageNet policy); training only")(
      "aa", po::value(&timm_aa_),
      "timm's RandAugment string (rand-m9-mstd0.5-inc1, as timm's --aa) after the crop and flip, filled with "
      "round(255 * --mean) as timm fills; training only")("ra-magnitude",
                                                          po::value(&ra_magnitude_)->default_value(ra_magnitude_),
                                                          "RandAugment's magnitude, a bin of 31 (0 to 30)")(
      "ra-num-ops", po::value(&ra_num_ops_)->default_value(ra_num_ops_), "RandAugment's operations an image")(
      "policy-interpolation", po::value(&policy_interpolation_),
      "nearest, bilinear or bicubic: how the policy's shears, translations and rotations sample the crop "
      "(default: bilinear, as torchvision's reference scripts pass their --interpolation; with --aa, random: each "
      "call bilinear or bicubic, timm's default)")(
      "color-jitter", po::value(&color_jitter_),
      "B[,C,S[,H]]: torchvision's ColorJitter after the policy (brightness, contrast, saturation, hue; one number: "
      "all three of B, C, S, as timm's --color-jitter); training only")(
      "random-grayscale", po::value(&s.augment.grayscale_probability)->default_value(0),
      "probability of torchvision's RandomGrayscale, last; training only")(
      "random-erase", po::value(&random_erase_)->default_value(0),
      "torchvision's RandomErasing(P) on the normalised image: float output (--dtype) gets the values; uint8 output "
      "only the box, in --meta, for the trainer to erase after normalising; training only")(
      "random-erase-value", po::value(&random_erase_value_)->default_value(random_erase_value_),
      "0 or random (N(0, 1) noise, float output)")(
      "ra-reps", po::value(&s.order.repeats)->default_value(1),
      "repeated augmentation (torchvision's --ra-reps, timm's --aug-repeats): each shard or image K times an epoch, "
      "its repeats dealt to K ranks (--world) with their own augmentations; an epoch is as long as without")(
      "dataset-samples", po::value(&s.dataset_samples)->default_value(0),
      "--ra-reps over shards: the samples in all of them, which sets each rank's epoch (ImageFolder: counted)")(
      "ra-round", po::value(&s.ra_round)->default_value(s.ra_round),
      "--ra-reps: the dataset's samples rounded down to a multiple of this before they are shared out, as "
      "RASampler (256; 0: not rounded)")(
      "mixup-alpha", po::value(&mixup_alpha_)->default_value(0),
      "MixUp over each batch, lambda from Beta(A, A) (0: off); the draws go in a float64 (n, 7) tensor, info "
      "\"mix\", after the labels, for the trainer's soft targets (tensorcom.imaging.mix_targets)")(
      "cutmix-alpha", po::value(&cutmix_alpha_)->default_value(0), "CutMix over each batch, as --mixup-alpha")(
      "cutmix-minmax", po::value(&cutmix_minmax_), "MIN,MAX: timm's cutmix_minmax, the box's sides as shares")(
      "mix-mode", po::value(&mix_mode_)->default_value(mix_mode_),
      "torchvision (v2.RandomChoice of MixUp and CutMix, partner the image before) or timm's Mixup modes batch, "
      "pair or elem (partner mirrored)")("mix-prob", po::value(&mix_prob_)->default_value(1),
                                         "timm's prob: a batch, pair or image is mixed")(
      "mix-switch-prob", po::value(&mix_switch_prob_)->default_value(0.5), "CutMix rather than MixUp when both are on")(
      "meta", "add a msgpack metadata tensor (keys, crops, epoch, stream place: docs/tools.md) after the labels")(
      "scale", po::value<std::vector<float>>()->multitoken(), "RandomResizedCrop area range (default 0.08 1)")(
      "ratio", po::value<std::vector<float>>()->multitoken(), "RandomResizedCrop aspect range (default 0.75 1.3333)")(
      "flip", po::value(&s.augment.flip_probability)->default_value(0.5), "horizontal flip probability")(
      "layout", po::value(&layout_)->default_value("BHWC"), "BHWC (the reference's) or BCHW")(
      "dtype", po::value(&dtype_)->default_value("uint8"), "uint8, float16 or float32 (normalised)")(
      "wire", po::value(&wire_)->default_value("raw"),
      "raw, jpeg[:QUALITY][,444|420] (quality 95, 4:4:4 by default) or zstd[:LEVEL] (lossless, level 1 by "
      "default): each uint8 image compressed on the workers after mixing, sent as streams, offsets and shape "
      "tensors that receivers decode (docs/tenbin.md)")(
      "mean", po::value(&mean_), "per-channel mean for float output (default ImageNet's 0.485,0.456,0.406)")(
      "std", po::value(&std_), "per-channel std for float output (default 0.229,0.224,0.225)")(
      "classes", po::value(&s.classes)->default_value(0), "labels must be below this (0: any)")(
      "max-pixels", po::value(&s.augment.max_pixels)->default_value(s.augment.max_pixels), "refuse larger images")(
      "memory-limit", po::value(&s.memory_limit)->default_value(default_memory_limit()),
      "bytes of encoded samples the server holds in all, from reading to decoding; an image over a 32nd of it (less "
      "with many workers) is passed over (default: an eighth of memory, at most 4 GiB)")(
      "max-image-bytes", po::value(&s.max_image_bytes)->default_value(s.max_image_bytes),
      "skip encoded images larger than this, unread")(
      "read-ahead", po::value(&s.read_ahead)->default_value(s.read_ahead),
      "http(s) and pipe: shards read at once ahead of the current one (0: none)")(
      "rank", po::value(&s.order.rank)->default_value(0), "this server's share of the shards ...")(
      "world", po::value(&s.order.world)->default_value(1), "... among this many servers")(
      "stream", po::value(&s.stream),
      "this server's stream name in --meta and resume tokens (default RANK/WORLD; give one when several servers "
      "share a --rank/--world)")("resume", po::value(&s.resume_path),
                                 "FILE: a resume token (train.py --checkpoint writes one beside the checkpoint): "
                                 "serve from its epoch on, leaving out the batches it says were consumed")(
      "resample", "draw shards with replacement instead of splitting them")(
      "subscribers", po::value(&s.subscribers)->default_value(0),
      "PUB: wait for this many subscribers before the first batch, and never drop a batch for a slow one "
      "(0: start with one, drop for slow ones)")(
      "hwm", po::value(&s.connection.send_high_water_mark)->default_value(1000),
      "batches queued per peer (ZeroMQ's count), at most --queue-bytes of "
      "them")("queue-bytes", po::value(&s.connection.queue_bytes)->default_value(s.connection.queue_bytes),
              "bytes of batches queued per peer (0: --hwm alone)")("single",
                                                                   "send single-buffer messages instead of multipart")(
      "linger", po::value(&linger_ms_)->default_value(linger_ms_),
      "ms to deliver queued batches at exit (after a stop signal: PUB none, PUSH at most 1000)")(
      "unconfirmed",
      "PUSH with --meta: send without asking receivers to confirm each batch (for receivers that never do, such "
      "as the Python reference's; nothing is then sent again after a lost connection)")(
      "delivery-timeout", po::value(&delivery_timeout_s_)->default_value(delivery_timeout_s_),
      "PUSH with --meta: seconds to wait at the end for receipts of every batch; exit 3 naming the batches "
      "still unconfirmed")(
      "wait-for-receiver", po::value(&wait_for_receiver_s_)->default_value(wait_for_receiver_s_),
      "PUSH that connects (zpush://): seconds to wait for a receiver before the first batch, then fail "
      "(0: do not wait)")("metrics", po::value(&s.metrics_address),
                          "serve Prometheus metrics on HOST:PORT (port 0: any; default: none)")(
      "metrics-hold", po::value(&s.metrics_hold_s)->default_value(0),
      "seconds to keep answering scrapes after serving ends")(
      "address", po::value(&s.addresses),
      (std::string("URLs to serve on (brace-expanded; default ") + programs::kDefaultServeUrl + ")").c_str());
  programs::add_curve_options(options, curve_);
  add_reference_options();
}

// The reference's options with no counterpart above, and shuffling, whose
// default and -S differ between the two servers as they do in the reference.
void ImageServerCli::add_reference_options() {
  ImageServerOptions& s = server;
  options.add_options()("benchmark,B", po::bool_switch(&s.repeat_first_batch),
                        "the reference's benchmark: serve the first batch over and over until stopped, reading and "
                        "decoding nothing more (the transport alone)");
  if (reference_.num_workers) {
    options.add_options()("num-workers,N", po::value(&num_workers_)->default_value(0),
                          "the reference's DataLoader workers: here decoding threads, as --workers (0: leave "
                          "--workers); with -p, their product");
  }
  if (reference_.normalize) {
    options.add_options()("normalize,n", po::bool_switch(&normalize_),
                          "the reference's -n: float32 normalised with --mean and --std (as --dtype float32)");
  }
  if (reference_.shuffle_by_default) {
    s.shuffle_buffer = kBareShuffle;
    options.add_options()("shuffle,S", po::value(&s.shuffle_buffer)->default_value(kBareShuffle),
                          "each epoch in a new shard order, then a buffer of K samples mixing them (0: no buffer); "
                          "bare --shuffle or -S (the reference's switch): 1000");
  } else {
    s.shuffle_buffer = 0;
    options.add_options()("shuffle", po::value(&s.shuffle_buffer)->default_value(0),
                          "each epoch in a new file order, then a buffer of K samples (bare --shuffle: 1000); "
                          "default: directory order, as the reference's")(
        "no-shuffle,S", po::bool_switch(&shuffle_switch_),
        "the reference's switch (its name notwithstanding): each epoch in a new file order, no buffer");
  }
}

namespace {

// The flags that decide what a batch's pixels and labels are: the recipe a
// trainer checks (sorted, values as typed, several joined by commas).
std::vector<std::string> recipe_flags(const po::parsed_options& parsed) {
  static const std::set<std::string> kRecipe = {"batch",
                                                "size",
                                                "size-schedule",
                                                "val",
                                                "val-resize",
                                                "crop-pct",
                                                "interpolation",
                                                "scale",
                                                "ratio",
                                                "flip",
                                                "auto-augment",
                                                "aa",
                                                "ra-magnitude",
                                                "ra-num-ops",
                                                "policy-interpolation",
                                                "color-jitter",
                                                "random-grayscale",
                                                "random-erase",
                                                "random-erase-value",
                                                "ra-reps",
                                                "mixup-alpha",
                                                "cutmix-alpha",
                                                "mix-mode",
                                                "mix-prob",
                                                "mix-switch-prob",
                                                "cutmix-minmax",
                                                "dtype",
                                                "layout",
                                                "mean",
                                                "std",
                                                "normalize"};
  std::map<std::string, std::string> given;
  for (const po::option& o : parsed.options) {
    if (kRecipe.count(o.string_key) == 0) continue;
    std::string value;
    for (const std::string& token : o.value) value += (value.empty() ? "" : ",") + token;
    given[o.string_key] = value;
  }
  std::vector<std::string> out;
  for (auto& [flag, value] : given) {
    out.push_back(flag);
    out.push_back(std::move(value));
  }
  return out;
}

}  // namespace

bool ImageServerCli::parse(int argc, char** argv) {
  po::positional_options_description positional;
  positional.add("address", -1);
  const std::vector<std::string> args = with_bare_shuffle(argc, argv, reference_.shuffle_by_default);
  const po::parsed_options parsed = po::command_line_parser(args).options(options).positional(positional).run();
  po::store(parsed, vars_);
  server.recipe = recipe_flags(parsed);
  if (vars_.count("help")) {
    std::cout << options;
    return false;
  }
  po::notify(vars_);
  finish();
  return true;
}

namespace {

// timm fills its geometric operations with the mean colour:
// min(255, round(255 * mean)) per channel, (124, 116, 104) for ImageNet's.
void fill_timm_policy_with_mean(ImageServerOptions& s) {
  auto& policy = s.augment.auto_augment;
  if (!policy || policy->kind != imaging::PolicyKind::kTimmRandAugment) return;
  for (int c = 0; c < 3; ++c) {
    const double value = std::nearbyint(255.0 * static_cast<double>(s.format.mean[static_cast<std::size_t>(c)]));
    policy->geometric.fill[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(std::clamp(value, 0.0, 255.0));
  }
}

// A seed no other server process is likely to draw.
std::uint64_t draw_seed() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

}  // namespace

void ImageServerCli::finish() {
  ImageServerOptions& s = server;
  if (s.addresses.empty()) s.addresses = {programs::kDefaultServeUrl};
  s.should_stop = programs::stop_requested;
  programs::install_stop_handlers();
  s.order.with_replacement = vars_.count("resample") > 0;
  // Servers that split the shards (--world > 1) must deal them alike: they
  // share seed 0 unless given one. Others draw theirs, so that servers
  // started alike make different streams.
  s.seed_given = vars_.count("seed") > 0 || s.order.world > 1;
  if (!s.seed_given) s.order.seed = draw_seed();
  finish_workers();
  finish_shuffle();
  finish_connection();
  finish_augment();
  finish_format();
  fill_timm_policy_with_mean(s);
  if (s.augment.erasing && s.format.pixels == PixelType::kUInt8 && !s.format.metadata) {
    throw ArgumentError(
        "--random-erase with uint8 output needs --meta: the boxes travel there, for the trainer to "
        "erase after normalising (or serve --dtype float16|float32)");
  }
  finish_mix();
  finish_repeats();
  finish_size_schedule();
  check_bounds();
  fit_images_to_memory(s);
  if (!s.metrics_address.empty()) (void)metrics::parse_host_port(s.metrics_address);  // refused before serving
}

// The reference spreads its decoding over -p processes of -N DataLoader
// workers each; here threads do it all, as many as both together.
void ImageServerCli::finish_workers() {
  if (parallel_ < 0 || num_workers_ < 0) throw po::error("-p/-P and -N must not be negative");
  if (parallel_ == 0 && num_workers_ == 0) return;
  if (!vars_["workers"].defaulted()) {
    throw po::error("--workers and the reference's -p/-P/-N all set the decoding threads: give only --workers");
  }
  const std::int64_t threads = std::max<std::int64_t>(parallel_, 1) * std::max<std::int64_t>(num_workers_, 1);
  server.workers = static_cast<int>(std::min<std::int64_t>(threads, std::numeric_limits<int>::max()));
}

void ImageServerCli::finish_shuffle() {
  if (reference_.shuffle_by_default) return;  // shard order shuffled each epoch; the buffer as given
  server.order.shuffle_units = shuffle_switch_ || server.shuffle_buffer > 0;
}

void ImageServerCli::finish_connection() {
  programs::refuse_inproc(server.addresses);
  // The name travels in every batch's metadata and in resume tokens, which
  // trainers decode as UTF-8 text: bounded, printable, UTF-8.
  if (vars_.count("stream") && (server.stream.empty() || server.stream.size() > kMostStreamName ||
                                formats::printable(server.stream, kMostStreamName) != server.stream)) {
    throw ArgumentError("--stream '" + formats::printable(server.stream.substr(0, 64)) + "': a stream name is 1 to " +
                        std::to_string(kMostStreamName) + " bytes of printable UTF-8");
  }
  ConnectionOptions& c = server.connection;
  if (vars_.count("single")) c.framing = Framing::kSingleBuffer;
  c.linger = Milliseconds(linger_ms_);
  c.curve = programs::curve_security(curve_);
  server.unconfirmed = vars_.count("unconfirmed") > 0;
  server.delivery_timeout = programs::seconds_option("--delivery-timeout", delivery_timeout_s_);
  server.wait_for_receiver = programs::seconds_option("--wait-for-receiver", wait_for_receiver_s_);
}

void ImageServerCli::finish_augment() {
  imaging::AugmentOptions& a = server.augment;
  a.validation = vars_.count("val") > 0;
  const std::optional<imaging::Resample> resample = imaging::parse_resample(interpolation_);
  if (!resample) {
    throw ArgumentError("--interpolation must be bilinear, bicubic or fast, not '" +
                        formats::printable(interpolation_) + "'");
  }
  a.resample = *resample;
  finish_val_resize();
  finish_policy();
  finish_color_jitter();
  finish_random_erase();
  if (vars_.count("scale")) {
    auto v = vars_["scale"].as<std::vector<float>>();
    if (v.size() != 2 || !(0 < v[0] && v[0] <= v[1] && v[1] <= 1))
      throw ArgumentError("--scale needs 0 < MIN <= MAX <= 1");
    a.crop.scale_min = v[0];
    a.crop.scale_max = v[1];
  }
  if (vars_.count("ratio")) {
    auto v = vars_["ratio"].as<std::vector<float>>();
    if (v.size() != 2 || !(0 < v[0] && v[0] <= v[1])) throw ArgumentError("--ratio needs 0 < MIN <= MAX");
    a.crop.ratio_min = v[0];
    a.crop.ratio_max = v[1];
  }
}

void ImageServerCli::finish_policy() {
  const bool ra_flags = !vars_["ra-magnitude"].defaulted() || !vars_["ra-num-ops"].defaulted();
  if (!auto_augment_.empty() && !timm_aa_.empty()) throw ArgumentError("--auto-augment or --aa: one policy, not both");
  const std::string& name = auto_augment_.empty() ? timm_aa_ : auto_augment_;
  if (name.empty()) {
    if (ra_flags || vars_.count("policy-interpolation")) {
      throw ArgumentError("--ra-magnitude, --ra-num-ops and --policy-interpolation need --auto-augment or --aa");
    }
    return;
  }
  const char* flag = auto_augment_.empty() ? "--aa" : "--auto-augment";
  imaging::AugmentOptions& a = server.augment;
  if (a.validation) throw ArgumentError(std::string(flag) + " is a training augmentation: not with --val");
  imaging::AutoAugmentOptions policy;
  try {
    policy.kind = imaging::parse_policy_kind(name);
  } catch (const ArgumentError& e) {
    throw ArgumentError(std::string(flag) + ": " + e.what());
  }
  const bool timm = policy.kind == imaging::PolicyKind::kTimmRandAugment;
  if (timm != auto_augment_.empty()) {
    throw ArgumentError(timm ? "--auto-augment takes ta_wide, ra or imagenet; timm's strings go to --aa"
                             : "--aa takes timm's RandAugment strings (rand-...); torchvision's policies go to "
                               "--auto-augment");
  }
  if (policy.kind != imaging::PolicyKind::kRandAugment && ra_flags) {
    throw ArgumentError("--ra-magnitude and --ra-num-ops are RandAugment's: they need --auto-augment ra");
  }
  const std::string interpolation = vars_.count("policy-interpolation") ? policy_interpolation_
                                    : timm                              ? "random"
                                                                        : "bilinear";
  const bool random = timm && interpolation == "random";
  const auto parsed = imaging::parse_policy_interpolation(interpolation);
  if (!parsed && !random) {
    throw ArgumentError("--policy-interpolation must be nearest, bilinear or bicubic" +
                        std::string(timm ? " or random" : "") + ", not '" + formats::printable(interpolation) + "'");
  }
  policy.geometric.interpolation = parsed.value_or(imaging::PolicyInterpolation::kNearest);
  policy.magnitude = ra_magnitude_;
  policy.num_ops = ra_num_ops_;
  if (timm) {
    policy.timm_config = name;
    policy.timm_random_interpolation = random;
  }
  try {
    (void)imaging::AutoAugmentPolicy(policy);
  } catch (const ArgumentError& e) {
    const std::string which = timm                                      ? "--aa: "
                              : ra_magnitude_ < 0 || ra_magnitude_ > 30 ? "--ra-magnitude: "
                                                                        : "--ra-num-ops: ";
    throw ArgumentError(which + e.what());
  }
  a.auto_augment = policy;
}

void ImageServerCli::finish_color_jitter() {
  imaging::AugmentOptions& a = server.augment;
  const double grey = a.grayscale_probability;
  if (!(grey >= 0 && grey <= 1)) {
    throw ArgumentError("--random-grayscale " + std::to_string(grey) + ": expected a probability from 0 to 1");
  }
  if ((!color_jitter_.empty() || grey > 0) && a.validation) {
    throw ArgumentError("--color-jitter and --random-grayscale are training augmentations: not with --val");
  }
  if (color_jitter_.empty()) return;
  std::vector<double> values = parse_numbers(color_jitter_, "--color-jitter", "B, B,C,S or B,C,S,H");
  if (values.size() != 1 && values.size() != 3 && values.size() != 4) {
    throw ArgumentError("--color-jitter '" + formats::printable(color_jitter_) + "': expected B, B,C,S or B,C,S,H");
  }
  if (values.size() == 1) values = {values[0], values[0], values[0]};
  try {
    a.color_jitter = imaging::color_jitter_from(values[0], values[1], values[2], values.size() == 4 ? values[3] : 0);
  } catch (const ArgumentError& e) {
    throw ArgumentError("--color-jitter: " + std::string(e.what()));
  }
}

void ImageServerCli::finish_random_erase() {
  if (random_erase_value_ != "0" && random_erase_value_ != "random") {
    throw ArgumentError("--random-erase-value must be 0 or random, not '" + formats::printable(random_erase_value_) +
                        "'");
  }
  if (!(random_erase_ >= 0 && random_erase_ <= 1)) {
    throw ArgumentError("--random-erase " + std::to_string(random_erase_) + ": expected a probability from 0 to 1");
  }
  if (random_erase_ == 0) {
    if (!vars_["random-erase-value"].defaulted()) throw ArgumentError("--random-erase-value needs --random-erase");
    return;
  }
  if (server.augment.validation) throw ArgumentError("--random-erase is a training augmentation: not with --val");
  imaging::RandomErasingOptions erasing;
  erasing.probability = random_erase_;
  erasing.random_values = random_erase_value_ == "random";
  server.augment.erasing = erasing;
}

void ImageServerCli::finish_repeats() {
  ImageServerOptions& s = server;
  constexpr std::size_t kMostRepeats = 64;
  if (s.order.repeats < 1 || s.order.repeats > kMostRepeats) {
    throw ArgumentError("--ra-reps " + std::to_string(s.order.repeats) + ": expected 1 to " +
                        std::to_string(kMostRepeats));
  }
  if (s.order.repeats == 1) {
    for (const char* name : {"dataset-samples", "ra-round"}) {
      if (!vars_[name].defaulted()) throw ArgumentError("--" + std::string(name) + " needs --ra-reps");
    }
    return;
  }
  if (s.augment.validation) throw ArgumentError("--ra-reps is a training augmentation: not with --val");
  if (s.order.with_replacement) throw ArgumentError("--ra-reps repeats every sample: not with --resample");
}

void ImageServerCli::finish_mix() {
  const bool minmax = !cutmix_minmax_.empty();
  if (mixup_alpha_ == 0 && cutmix_alpha_ == 0 && !minmax) {
    for (const char* name : {"mix-mode", "mix-prob", "mix-switch-prob"}) {
      if (!vars_[name].defaulted())
        throw ArgumentError("--" + std::string(name) + " needs --mixup-alpha or --cutmix-alpha");
    }
    return;
  }
  ImageServerOptions& s = server;
  if (s.augment.validation) throw ArgumentError("MixUp/CutMix are training augmentations: not with --val");
  if (s.augment.erasing && s.format.pixels == PixelType::kUInt8) {
    throw ArgumentError(
        "--random-erase with uint8 output erases on the trainer, after the servers mix: serve --dtype float16|float32 "
        "to erase each image before it is mixed");
  }
  imaging::MixOptions m;
  const auto mode = imaging::parse_mix_mode(mix_mode_);
  if (!mode)
    throw ArgumentError("--mix-mode '" + formats::printable(mix_mode_) +
                        "': expected torchvision, batch, pair or elem");
  m.mode = *mode;
  m.mixup_alpha = mixup_alpha_;
  m.cutmix_alpha = cutmix_alpha_;
  m.probability = mix_prob_;
  m.switch_probability = mix_switch_prob_;
  if (minmax) {
    const std::vector<double> v = parse_numbers(cutmix_minmax_, "--cutmix-minmax", "MIN,MAX");
    if (v.size() != 2)
      throw ArgumentError("--cutmix-minmax '" + formats::printable(cutmix_minmax_) + "': expected MIN,MAX");
    m.cutmix_minmax = std::array<double, 2>{v[0], v[1]};
  }
  try {
    imaging::check_mix_options(m);
  } catch (const ArgumentError& e) {
    throw ArgumentError("MixUp/CutMix: " + std::string(e.what()));
  }
  s.mix = m;
}

void ImageServerCli::finish_format() {
  BatchFormat& f = server.format;
  f.metadata = vars_.count("meta") > 0;
  if (normalize_) {
    if (!vars_["dtype"].defaulted() && dtype_ != "float32")
      throw po::error("-n/--normalize means --dtype float32, not --dtype " + formats::printable(dtype_));
    dtype_ = "float32";
  }
  const std::optional<ImageLayout> layout = parse_layout(layout_);
  if (!layout || *layout == ImageLayout::kBHW) throw ArgumentError("--layout '" + layout_ + "': expected BHWC or BCHW");
  f.layout = *layout;
  if (dtype_ == "uint8") {
    f.pixels = PixelType::kUInt8;
  } else if (dtype_ == "float16") {
    f.pixels = PixelType::kFloat16;
  } else if (dtype_ == "float32") {
    f.pixels = PixelType::kFloat32;
  } else {
    throw ArgumentError("--dtype '" + dtype_ + "': expected uint8, float16 or float32");
  }
  if (!mean_.empty()) f.mean = parse_triple(mean_, "mean");
  if (!std_.empty()) f.std = parse_triple(std_, "std");
  try {
    check_mean_std(f.mean, f.std);  // refused here, not by every worker
  } catch (const ArgumentError& e) {
    throw ArgumentError(std::string("--mean/--std: ") + e.what());
  }
  server.wire = parse_wire_format(wire_);
  if (server.wire.kind != WireFormat::Kind::kRaw && f.pixels != PixelType::kUInt8) {
    throw ArgumentError("--wire " + wire_ + " compresses uint8 images: not with --dtype " + dtype_ +
                        " (normalise on the receiving side)");
  }
}

void ImageServerCli::finish_val_resize() {
  imaging::AugmentOptions& a = server.augment;
  const int size = server.format.size;
  if (val_resize_ == 0 && crop_pct_ == 0) return;
  if (!a.validation) throw ArgumentError("--val-resize and --crop-pct are for validation: give --val");
  if (val_resize_ != 0 && crop_pct_ != 0)
    throw ArgumentError("--val-resize and --crop-pct both set the resize: give one");
  if (crop_pct_ != 0) {
    if (!(crop_pct_ > 0 && crop_pct_ <= 1)) {
      std::ostringstream given;
      given << crop_pct_;
      throw ArgumentError("--crop-pct " + given.str() + ": expected a share in (0, 1]");
    }
    a.resize.shorter = static_cast<int>(std::floor(size / crop_pct_));
    return;
  }
  if (val_resize_ < size || val_resize_ > kMostSize * 4) {
    throw ArgumentError("--val-resize " + std::to_string(val_resize_) + ": expected from --size (" +
                        std::to_string(size) + ") to " + std::to_string(kMostSize * 4) +
                        ": the centre crop must fit the resized image");
  }
  a.resize.shorter = val_resize_;
}

void ImageServerCli::finish_size_schedule() {
  if (!vars_.count("size-schedule")) return;
  // Validation is measured at one size, as FFCV's val_res: a validation
  // server keeps its --size.
  if (server.augment.validation) {
    throw ArgumentError("--size-schedule is for training: --val serves every epoch at its --size");
  }
  if (!vars_["size"].defaulted()) throw ArgumentError("--size-schedule sets the size of every epoch: drop --size");
  server.size_schedule = parse_size_schedule(size_schedule_, kMostSize);
  server.format.size = server.size_schedule->size_at(0);
}

namespace {

// An unsigned option as the user likely typed it: the parser reads "-1" as
// 2^64 - 1, which would be a puzzling thing to be told. (A value within
// 2^31 of 2^64 is taken for a small negative number.)
std::string as_given(std::uint64_t value) {
  constexpr std::uint64_t kSmallNegatives = std::numeric_limits<std::uint64_t>::max() - (std::uint64_t{1} << 31);
  if (value > kSmallNegatives) return std::to_string(static_cast<std::int64_t>(value));
  return std::to_string(value);
}

}  // namespace

void ImageServerCli::check_bounds() const {
  const ImageServerOptions& s = server;
  // Bounds well past any real job, checked before anything is allocated:
  // negative numbers read as huge unsigned ones, and a huge batch or image
  // size would end the program in bad_alloc.
  constexpr std::uint64_t kMostBatch = 65536, kMostWorkers = 1024, kMostBatchBytes = std::uint64_t{8} << 30;
  auto in_range = [](const char* option, std::uint64_t value, std::uint64_t most) {
    if (value < 1 || value > most) {
      throw ArgumentError(std::string(option) + " " + as_given(value) + ": expected 1 to " + std::to_string(most));
    }
  };
  in_range("--batch", s.format.batch_size, kMostBatch);
  in_range("--size", s.format.size > 0 ? static_cast<std::uint64_t>(s.format.size) : 0, kMostSize);
  in_range("--workers", s.workers > 0 ? static_cast<std::uint64_t>(s.workers) : 0, kMostWorkers);
  BatchFormat largest = s.format;  // the batches of the schedule's largest size, or of --size
  if (s.size_schedule) largest.size = s.size_schedule->largest();
  if (largest.batch_size * largest.image_bytes() > kMostBatchBytes) {
    throw ArgumentError("--batch " + std::to_string(largest.batch_size) + " of size " + std::to_string(largest.size) +
                        " makes batches of " + std::to_string(largest.batch_size * largest.image_bytes()) +
                        " bytes; at most " + std::to_string(kMostBatchBytes));
  }
  const double flip = s.augment.flip_probability;
  if (!(flip >= 0 && flip <= 1)) throw ArgumentError("--flip " + std::to_string(flip) + ": expected 0 to 1");
  // 0 means forever or never; a negative number reads as a huge one.
  constexpr std::uint64_t kMostCount = 1000000000;
  constexpr std::uint64_t kMostReadAhead = 64;
  if (s.read_ahead > kMostReadAhead) {
    throw ArgumentError("--read-ahead " + as_given(s.read_ahead) + ": expected 0 to " + std::to_string(kMostReadAhead));
  }
  for (const auto& [option, value] : {std::pair{"--epochs", s.epochs}, std::pair{"--report", s.report}}) {
    if (value > kMostCount) {
      throw ArgumentError(std::string(option) + " " + as_given(value) + ": expected 0 to " +
                          std::to_string(kMostCount));
    }
  }
  if (s.order.world == 0 || s.order.rank >= s.order.world) throw ArgumentError("--rank must be below --world");
  // Bounds well past any real job; they also catch negative numbers, which
  // the option parser reads as huge unsigned ones.
  constexpr std::uint64_t kMostSubscribers = 100000, kMostEpochSamples = std::uint64_t{1} << 40;
  if (s.subscribers > kMostSubscribers) {
    throw ArgumentError("--subscribers " + as_given(s.subscribers) + ": expected 0 to " +
                        std::to_string(kMostSubscribers));
  }
  if (s.epoch_batches > kMostEpochSamples / s.format.batch_size) {
    throw ArgumentError("--epoch-batches " + as_given(s.epoch_batches) + ": expected at most " +
                        std::to_string(kMostEpochSamples / s.format.batch_size) + " batches of " +
                        std::to_string(s.format.batch_size));
  }
}

}  // namespace tensorcom::pipeline
