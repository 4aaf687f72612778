// tensorstat: what is in the batches: per input tensor the value range,
// mean, standard deviation and the (dtype, shape) signatures seen; per channel
// of image tensors the mean and standard deviation (what a Normalize
// transform needs); and how the labels spread over the classes.
//   tensorstat -c 50 zsub://127.0.0.1:7880
//   tensorstat --json 'zsub://127.0.0.1:788{0..3}'
#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "batch_source.h"
#include "image_batch.h"
#include "json.h"
#include "tensorcom/programs/program.h"

namespace po = boost::program_options;
using namespace tensorcom;
using namespace tensorcom::tools;

namespace {

struct StatOptions {
  SourceOptions source;
  std::int64_t count = 20;  // batches to read
  bool json = false;        // one JSON object instead of text
  bool raw = false;         // the reference's --raw: the source's rate line only, no statistics
};

// Count, extremes, mean and sum of squared deviations of a stream of values.
// Batches are summarised exactly (two passes) and merged with Chan et al.'s
// formula, which stays accurate where sum(x^2)/n - mean^2 (the reference's)
// cancels.
struct Moments {
  std::uint64_t n = 0;
  double mean = 0;
  double m2 = 0;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();

  void merge(const Moments& other) {
    if (other.n == 0) return;
    const double total = static_cast<double>(n + other.n);
    const double delta = other.mean - mean;
    mean += delta * static_cast<double>(other.n) / total;
    m2 += other.m2 + delta * delta * static_cast<double>(n) * static_cast<double>(other.n) / total;
    n += other.n;
    const bool nan = std::isnan(lo) || std::isnan(other.lo);
    lo = nan ? std::numeric_limits<double>::quiet_NaN() : std::min(lo, other.lo);
    hi = nan ? std::numeric_limits<double>::quiet_NaN() : std::max(hi, other.hi);
  }
  // Population standard deviation (NumPy's default, ddof=0).
  [[nodiscard]] double std_dev() const { return n ? std::sqrt(m2 / static_cast<double>(n)) : 0; }
};

// Calls f(begin, end, channel) for each run of `run` elements of one
// channel, the channels taking turns (see ImageTensorInfo::channel_run).
template <class F>
void for_each_run(std::size_t n, std::size_t channels, std::size_t run, F&& f) {
  std::size_t c = 0;
  for (std::size_t begin = 0; begin < n; begin += run) {
    f(begin, std::min(begin + run, n), c);
    c = c + 1 == channels ? 0 : c + 1;
  }
}

// Moments of each channel of values, in two passes: the mean first, then the
// squared deviations from it.
template <class T>
std::vector<Moments> moments_by_channel(std::span<const T> values, std::size_t channels, std::size_t run) {
  std::vector<Moments> m(channels);
  std::vector<double> sum(channels, 0.0);
  std::vector<bool> nan(channels, false);
  for_each_run(values.size(), channels, run, [&](std::size_t begin, std::size_t end, std::size_t c) {
    for (std::size_t i = begin; i < end; ++i) {
      const auto v = static_cast<double>(values[i]);
      sum[c] += v;
      m[c].lo = std::min(m[c].lo, v);
      m[c].hi = std::max(m[c].hi, v);
      if (std::isnan(v)) nan[c] = true;
    }
    m[c].n += end - begin;
  });
  for (std::size_t c = 0; c < channels; ++c) {
    m[c].mean = m[c].n ? sum[c] / static_cast<double>(m[c].n) : 0;
    // NaN propagates to the extremes, as with NumPy's amin and amax.
    if (nan[c]) m[c].lo = m[c].hi = std::numeric_limits<double>::quiet_NaN();
  }
  for_each_run(values.size(), channels, run, [&](std::size_t begin, std::size_t end, std::size_t c) {
    for (std::size_t i = begin; i < end; ++i) {
      const double d = static_cast<double>(values[i]) - m[c].mean;
      m[c].m2 += d * d;
    }
  });
  return m;
}

// The moments of each channel of an image tensor, or of the whole of any
// other tensor as one channel.
std::vector<Moments> tensor_moments(const Tensor& tensor, const std::optional<ImageTensorInfo>& image) {
  const std::size_t channels = image ? static_cast<std::size_t>(image->channels) : 1;
  const std::size_t run = image ? image->channel_run() : std::max<std::size_t>(tensor.numel(), 1);
  return visit_values(tensor, [&](auto values) { return moments_by_channel(values, channels, run); });
}

struct Signature {
  DType dtype;
  Shape shape;
  bool operator==(const Signature&) const = default;
};

// The per-channel statistics of one input, while its layout stays the same.
struct ChannelStats {
  ImageLayout layout = ImageLayout::kBHWC;
  std::int64_t channels = 0;
  std::vector<Moments> moments;
  bool consistent = true;  // false once a batch had another layout or channel count
};

struct InputStats {
  std::uint64_t count = 0;  // batches that had this input
  Moments all;
  std::vector<Signature> signatures;  // in the order first seen
  std::optional<ChannelStats> channels;
};

struct LabelStats {
  std::optional<std::size_t> input;  // where the labels were first found
  std::uint64_t n = 0;
  std::map<std::int64_t, std::uint64_t> counts;
};

class BatchStatistics {
 public:
  void add(const TensorList& batch) {
    ++batches_;
    if (inputs_.size() < batch.size()) inputs_.resize(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) add_input(inputs_[i], batch[i], i);
    add_labels(batch);
  }

  [[nodiscard]] std::uint64_t batches() const noexcept { return batches_; }
  [[nodiscard]] const std::vector<InputStats>& inputs() const noexcept { return inputs_; }
  [[nodiscard]] const LabelStats& labels() const noexcept { return labels_; }

 private:
  // One pass over the data serves both the per-channel and the whole-tensor
  // statistics: the whole is the merge of the channels.
  static void add_input(InputStats& s, const Tensor& tensor, std::size_t index) {
    ++s.count;
    Signature signature{tensor.dtype(), tensor.shape()};
    if (std::find(s.signatures.begin(), s.signatures.end(), signature) == s.signatures.end()) {
      s.signatures.push_back(std::move(signature));
    }
    const std::optional<ImageTensorInfo> image = image_layout(tensor, index);
    const std::vector<Moments> moments = tensor_moments(tensor, image);
    for (const Moments& m : moments) s.all.merge(m);
    add_channels(s, image, moments);
  }

  static void add_channels(InputStats& s, const std::optional<ImageTensorInfo>& image,
                           const std::vector<Moments>& moments) {
    if (s.count == 1 && image) s.channels = ChannelStats{image->layout, image->channels, {}, true};
    if (!s.channels || !s.channels->consistent) return;
    if (!image || image->layout != s.channels->layout || image->channels != s.channels->channels) {
      s.channels->consistent = false;
      return;
    }
    s.channels->moments.resize(moments.size());
    for (std::size_t c = 0; c < moments.size(); ++c) s.channels->moments[c].merge(moments[c]);
  }

  void add_labels(const TensorList& batch) {
    std::optional<ImageTensorInfo> images = find_images(batch);
    const auto size = images ? images->batch : static_cast<std::int64_t>(batch_size(batch));
    std::optional<std::size_t> index = find_labels(batch, size);
    if (!index) return;
    if (!labels_.input) labels_.input = index;
    for (std::int64_t label : integer_values(batch[*index])) {
      ++labels_.counts[label];
      ++labels_.n;
    }
  }

  std::uint64_t batches_ = 0;
  std::vector<InputStats> inputs_;
  LabelStats labels_;
};

// ---- text output, in the reference's words ----

// Python's "{:.3g}".
std::string g3(double value) {
  if (std::isnan(value)) return "nan";
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// The reference's "{count} [{min} {max}] mean={mean} std={std} n={n}".
std::string moments_line(std::uint64_t count, const Moments& m) {
  return std::to_string(count) + " [" + g3(m.lo) + " " + g3(m.hi) + "] mean=" + g3(m.mean) + " std=" + g3(m.std_dev()) +
         " n=" + std::to_string(m.n);
}

// As Python prints a set of (dtype,) + shape tuples: {('uint8', 32, 224, 224, 3)}.
std::string signature_set(const std::vector<Signature>& signatures) {
  std::string out = "{";
  for (const Signature& s : signatures) {
    if (out.size() > 1) out += ", ";
    out += "('" + std::string(dtype_name(s.dtype)) + "'";
    for (std::int64_t d : s.shape) out += ", " + std::to_string(d);
    out += s.shape.empty() ? ",)" : ")";
  }
  return out + "}";
}

std::string g3_list(const std::vector<Moments>& moments, bool std_dev) {
  std::string out = "[";
  for (const Moments& m : moments) out += (out.size() > 1 ? " " : "") + g3(std_dev ? m.std_dev() : m.mean);
  return out + "]";
}

void print_channels(const ChannelStats& c) {
  if (!c.consistent) {
    std::cout << "channels: not computed, the image layout changed between batches\n";
    return;
  }
  std::cout << "channels " << layout_name(c.layout) << ": mean=" << g3_list(c.moments, false)
            << " std=" << g3_list(c.moments, true) << '\n';
}

// The classes with the fewest and the most labels (the lowest label on ties).
std::pair<std::map<std::int64_t, std::uint64_t>::const_iterator, std::map<std::int64_t, std::uint64_t>::const_iterator>
rarest_and_commonest(const LabelStats& labels) {
  auto by_count = [](const auto& a, const auto& b) { return a.second < b.second; };
  auto rarest = std::min_element(labels.counts.begin(), labels.counts.end(), by_count);
  auto commonest = std::max_element(labels.counts.begin(), labels.counts.end(), by_count);
  // max_element returns the first maximum, as wanted.
  return {rarest, commonest};
}

void print_labels(const LabelStats& labels) {
  std::cout << "=== Labels (input " << *labels.input << ") ===\n\n";
  auto [rarest, commonest] = rarest_and_commonest(labels);
  std::cout << labels.n << " labels, " << labels.counts.size() << " distinct classes in ["
            << labels.counts.begin()->first << " " << labels.counts.rbegin()->first << "], per class: min "
            << rarest->second << " (class " << rarest->first << "), max " << commonest->second << " (class "
            << commonest->first << ")\n";
}

void print_text(const BatchStatistics& stats, const BatchSource& source) {
  std::cout << "tensorstat: " << stats.batches() << " batches from " << source.describe() << '\n'
            << "source: " << source.stats().summary() << "\n\n";
  for (std::size_t i = 0; i < stats.inputs().size(); ++i) {
    const InputStats& s = stats.inputs()[i];
    std::cout << "=== Input " << i << " ===\n\n"
              << moments_line(s.count, s.all) << '\n'
              << signature_set(s.signatures) << '\n';
    if (s.channels) print_channels(*s.channels);
    std::cout << '\n';
  }
  if (stats.labels().input) print_labels(stats.labels());
  std::cout << std::flush;
}

// ---- JSON output ----

void add_moments(Json& object, const Moments& m) {
  object["min"] = m.lo;
  object["max"] = m.hi;
  object["mean"] = m.mean;
  object["std"] = m.std_dev();
  object["n"] = m.n;
}

Json signatures_json(const std::vector<Signature>& signatures) {
  Json items = Json::array();
  for (const Signature& s : signatures) items.push_back({{"dtype", dtype_name(s.dtype)}, {"shape", s.shape}});
  return items;
}

Json channels_json(const ChannelStats& c) {
  if (!c.consistent) return nullptr;
  Json means = Json::array();
  Json stds = Json::array();
  for (const Moments& m : c.moments) {
    means.push_back(m.mean);
    stds.push_back(m.std_dev());
  }
  return {{"layout", layout_name(c.layout)}, {"mean", std::move(means)}, {"std", std::move(stds)}};
}

Json labels_json(const LabelStats& labels) {
  if (!labels.input) return nullptr;
  Json counts = Json::object();
  for (const auto& [label, count] : labels.counts) counts[std::to_string(label)] = count;
  auto [rarest, commonest] = rarest_and_commonest(labels);
  return {{"input", *labels.input},
          {"n", labels.n},
          {"classes", labels.counts.size()},
          {"min", labels.counts.begin()->first},
          {"max", labels.counts.rbegin()->first},
          {"min_count", rarest->second},
          {"max_count", commonest->second},
          {"counts", std::move(counts)}};
}

void print_json(const BatchStatistics& stats) {
  Json inputs = Json::array();
  for (std::size_t i = 0; i < stats.inputs().size(); ++i) {
    const InputStats& s = stats.inputs()[i];
    Json input = {{"index", i}, {"count", s.count}};
    add_moments(input, s.all);
    input["signatures"] = signatures_json(s.signatures);
    input["channels"] = s.channels ? channels_json(*s.channels) : nullptr;
    inputs.push_back(std::move(input));
  }
  const Json report = {
      {"batches", stats.batches()}, {"inputs", std::move(inputs)}, {"labels", labels_json(stats.labels())}};
  std::cout << report.dump() << std::endl;
}

// The reference's --raw: batches counted, not looked into.
int run_raw(const StatOptions& options) {
  BatchSource source("tensorstat", options.source);
  std::int64_t batches = 0;
  while (batches < options.count && source.next()) ++batches;
  std::cout << "tensorstat: " << batches << " batches from " << source.describe() << '\n'
            << "source: " << source.stats().summary() << std::endl;
  return source.exit_status();
}

int run(const StatOptions& options) {
  if (options.raw) return run_raw(options);
  BatchSource source("tensorstat", options.source);
  BatchStatistics stats;
  while (stats.batches() < static_cast<std::uint64_t>(options.count)) {
    std::optional<TensorList> batch = source.next();
    if (!batch) break;
    stats.add(*batch);
  }
  if (stats.batches() == 0) {
    // After a silence BatchSource has said so already.
    if (source.end() != SourceEnd::kSilent)
      std::cerr << "tensorstat: no batches received from " << source.describe() << '\n';
  } else if (options.json) {
    print_json(stats);
  } else {
    print_text(stats, source);
  }
  return source.exit_status();
}

}  // namespace

int main(int argc, char** argv) {
  return programs::program_main("tensorstat", [&]() -> int {
    StatOptions o;
    po::options_description options("options");
    options.add_options()("help,h", "show this help")("count,c", po::value(&o.count)->default_value(o.count),
                                                      "batches to read")("json", po::bool_switch(&o.json),
                                                                         "print one JSON object instead of text")(
        "raw,r", po::bool_switch(&o.raw), "the reference's --raw: count the batches, print only the source's rates")(
        "unbatched,b", po::bool_switch(), "the reference's switch, accepted and ignored as the reference ignores it");
    add_source_options(options, o.source);
    auto vars = parse_command_line(argc, argv,
                                   "usage: tensorstat [-c N] [--json] [URL...]  (default URL " +
                                       std::string(programs::kDefaultReceiveUrl) + ", brace-expanded)",
                                   options, o.source);
    if (!vars) return 0;
    if (o.count < 1) throw po::error("--count must be at least 1");
    if (o.raw && o.json) throw po::error("--raw prints one text line; leave out --json");
    return run(o);
  });
}
