// tensorshow: look at the images of a batch, each labelled with its class.
// Headless by default: the images go into a PNG grid laid out as
// torchvision's make_grid does (8 a row, 2 px of black padding).
//   tensorshow -o batch.png zsub://127.0.0.1:7880
//   tensorshow -n 4 -o batch.png -C classes.json   batch-000.png ... batch-003.png
//   tensorshow --window                            on a display, any key for the next
#include <boost/program_options.hpp>

#include <opencv2/core.hpp>
#include <opencv2/highgui.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "batch_source.h"
#include "image_batch.h"
#include "json.h"
#include "tensorcom/programs/program.h"

namespace po = boost::program_options;
using namespace tensorcom;
using namespace tensorcom::tools;

namespace {

// make_grid's defaults.
constexpr std::int64_t kGridColumns = 8;
constexpr int kPadding = 2;
const char* const kWindowName = "tensorshow";

struct ShowOptions {
  SourceOptions source;
  std::int64_t batches = 1;  // batches to show
  std::string output = "tensorshow.png";
  bool write = true;                   // write PNGs (not with --window alone)
  bool window = false;                 // show in an OpenCV window
  std::optional<std::string> classes;  // classes.json
  bool unbatched = false;              // each message is one sample, as the reference's -b says
  std::int64_t per_batch = 0;          // images drawn from each batch, the first ones (0: all)
  std::string mode = "imgclass";       // the reference's -m: images with their classes
};

// The reference's default: four servers' ports.
constexpr const char* kDefaultUrls = "zsub://127.0.0.1:{7880..7883}";

// The reference's -t is how long each image stays up (-1: until a key);
// here -t is the silence timeout, and the window waits for a key.
constexpr const char* kTimeoutHint =
    " (in the reference's tensorshow -t -1 kept each image up until a key: here --window always does; leave -t out)";

// Maps element values to 0..255: uint8 as they are, floats min-max scaled
// over the whole batch (make_grid's normalize=True), so that tiles compare.
struct ByteScale {
  double lo = 0;
  double scale = 1;  // 255 / (hi - lo)

  [[nodiscard]] std::uint8_t operator()(double v) const {
    if (std::isnan(v)) return 0;
    return static_cast<std::uint8_t>(std::clamp(std::round((v - lo) * scale), 0.0, 255.0));
  }
};

template <class T>
ByteScale byte_scale(std::span<const T> values) {
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    return {};
  } else {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (T value : values) {
      const auto v = static_cast<double>(value);
      if (!std::isfinite(v)) continue;  // one inf would flatten every other value to 0
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (!(hi > lo)) return {std::isfinite(lo) ? lo : 0, 0};  // constant: all black, as make_grid
    return {lo, 255.0 / (hi - lo)};
  }
}

struct GridGeometry {
  int columns;
  int rows;
  int tile_width;   // image width + padding
  int tile_height;  // image height + padding
};

GridGeometry grid_geometry(const ImageTensorInfo& info) {
  const std::int64_t columns = std::min(kGridColumns, info.batch);
  const std::int64_t rows = (info.batch + columns - 1) / columns;
  const std::int64_t width = columns * (info.width + kPadding) + kPadding;
  const std::int64_t height = rows * (info.height + kPadding) + kPadding;
  // OpenCV sizes are int; a larger grid would not be viewable anyway.
  constexpr std::int64_t kMaxSide = 1 << 15;
  if (width > kMaxSide || height > kMaxSide) {
    throw ArgumentError("a grid of " + std::to_string(info.batch) + " images of " + std::to_string(info.height) + "x" +
                        std::to_string(info.width) + " would be " + std::to_string(width) + "x" +
                        std::to_string(height) + " pixels, more than " + std::to_string(kMaxSide) + " a side");
  }
  return {static_cast<int>(columns), static_cast<int>(rows), static_cast<int>(info.width + kPadding),
          static_cast<int>(info.height + kPadding)};
}

// The top-left pixel of image b in the grid.
cv::Point tile_origin(const GridGeometry& g, std::int64_t b) {
  return {static_cast<int>(b % g.columns) * g.tile_width + kPadding,
          static_cast<int>(b / g.columns) * g.tile_height + kPadding};
}

// Copies every image into its tile, as BGR (OpenCV's order); grey images
// fill all three channels, and a fourth (alpha) channel is dropped.
template <class T>
void paint_images(std::span<const T> values, const ImageTensorInfo& info, const GridGeometry& g, cv::Mat& grid) {
  const ByteScale to_byte = byte_scale(values);
  const bool colour = info.channels >= 3;
  for (std::int64_t b = 0; b < info.batch; ++b) {
    const cv::Point origin = tile_origin(g, b);
    for (std::int64_t y = 0; y < info.height; ++y) {
      auto* row = grid.ptr<cv::Vec3b>(origin.y + static_cast<int>(y)) + origin.x;
      for (std::int64_t x = 0; x < info.width; ++x) {
        for (int c = 0; c < 3; ++c) {
          row[x][2 - c] = to_byte(static_cast<double>(values[info.offset(b, y, x, colour ? c : 0)]));
        }
      }
    }
  }
}

// White text with a dark outline, readable on any image, clipped to the tile.
void draw_label(cv::Mat& grid, const cv::Rect& tile, const std::string& text) {
  cv::Mat roi = grid(tile);
  const int font = cv::FONT_HERSHEY_SIMPLEX;
  const double scale = std::clamp(tile.width / 200.0, 0.3, 0.6);
  int baseline = 0;
  const cv::Size size = cv::getTextSize(text, font, scale, 1, &baseline);
  const cv::Point at(2, 2 + size.height);
  cv::putText(roi, text, at, font, scale, cv::Scalar(0, 0, 0), 3, cv::LINE_AA);
  cv::putText(roi, text, at, font, scale, cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
}

std::string class_text(std::int64_t label, const ClassNames& names) {
  auto it = names.find(label);
  return it != names.end() ? it->second : std::to_string(label);
}

// What one batch holds, found once and reported on stdout.
struct BatchImages {
  ImageTensorInfo images;
  std::optional<std::size_t> labels;
};

// The reference's -b: a message that is one sample, every tensor given a
// leading batch dimension of 1. The views share the batch's memory, which
// the caller keeps alive.
TensorList as_batch_of_one(TensorList& sample) {
  TensorList batch;
  for (Tensor& t : sample) {
    Shape shape = t.shape();
    shape.insert(shape.begin(), 1);
    batch.push_back(Tensor::view(t.dtype(), std::move(shape), t.data(), t.owner(), t.info()));
  }
  return batch;
}

BatchImages find_batch_images(const TensorList& batch, std::uint64_t number) {
  std::optional<ImageTensorInfo> images = find_images(batch);
  if (!images) {
    std::string held;
    for (const Tensor& t : batch) held += (held.empty() ? "" : ", ") + describe_tensor(t);
    throw ArgumentError(
        "batch " + std::to_string(number) +
        " holds no images (uint8 or float, BHWC, BCHW or BHW); it holds: " + (held.empty() ? "no tensors" : held));
  }
  return {*images, find_labels(batch, images->batch)};
}

cv::Mat make_grid(const TensorList& batch, const BatchImages& found, const ClassNames& names) {
  const GridGeometry g = grid_geometry(found.images);
  cv::Mat grid(g.rows * g.tile_height + kPadding, g.columns * g.tile_width + kPadding, CV_8UC3, cv::Scalar::all(0));
  visit_values(batch[found.images.index], [&](auto values) { paint_images(values, found.images, g, grid); });
  if (found.labels) {
    const std::vector<std::int64_t> labels = integer_values(batch[*found.labels]);
    for (std::int64_t b = 0; b < found.images.batch; ++b) {
      const cv::Rect tile(tile_origin(g, b),
                          cv::Size(static_cast<int>(found.images.width), static_cast<int>(found.images.height)));
      draw_label(grid, tile, class_text(labels[static_cast<std::size_t>(b)], names));
    }
  }
  return grid;
}

// OUT.png for one batch; OUT-000.png, OUT-001.png ... for several.
std::string output_path(const std::string& output, std::int64_t batches, std::int64_t number) {
  if (batches == 1) return output;
  std::filesystem::path path(output);
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "-%03lld", static_cast<long long>(number));
  return (path.parent_path() / (path.stem().string() + suffix + path.extension().string())).string();
}

void write_png(const std::string& path, const cv::Mat& grid) {
  bool written = false;
  try {
    written = cv::imwrite(path, grid);
  } catch (const cv::Exception& e) {
    throw IoError("cannot write '" + path + "' (" + e.msg + ")", EIO);
  }
  if (!written) throw IoError("cannot write '" + path + "'", errno ? errno : EIO);
}

bool has_display() { return std::getenv("DISPLAY") != nullptr || std::getenv("WAYLAND_DISPLAY") != nullptr; }

// Returns false when the user closed the window or pressed q or Esc.
bool show_window(const cv::Mat& grid, std::uint64_t number) {
  try {
    cv::namedWindow(kWindowName, cv::WINDOW_AUTOSIZE);
    cv::setWindowTitle(kWindowName, "tensorshow: batch " + std::to_string(number) + " (any key: next, q: quit)");
    cv::imshow(kWindowName, grid);
    const int key = cv::waitKey(0);
    return key != 'q' && key != 27 && key != -1;
  } catch (const cv::Exception& e) {
    throw UnavailableError("cannot open a window (" + e.msg + "); write a PNG with -o instead");
  }
}

std::string describe_batch(const TensorList& batch, const BatchImages& found) {
  std::string text = std::to_string(found.images.batch) + " images " + describe_tensor(batch[found.images.index]) +
                     " " + std::string(layout_name(found.images.layout));
  if (found.labels) text += ", labels " + describe_tensor(batch[*found.labels]);
  return text;
}

int show(const ShowOptions& options) {
  const ClassNames names = options.classes ? read_class_names(*options.classes) : ClassNames{};
  BatchSource source("tensorshow", options.source);
  for (std::int64_t number = 0; number < options.batches; ++number) {
    std::optional<TensorList> received = source.next();
    if (!received) return source.exit_status();
    // Unbatched, the views in batch keep using received's memory.
    const TensorList batch = options.unbatched ? as_batch_of_one(*received) : std::move(*received);
    BatchImages found = find_batch_images(batch, static_cast<std::uint64_t>(number));
    if (options.per_batch > 0) found.images.batch = std::min(found.images.batch, options.per_batch);
    const cv::Mat grid = make_grid(batch, found, names);
    std::cout << "tensorshow: batch " << number << ": " << describe_batch(batch, found);
    if (options.write) {
      const std::string path = output_path(options.output, options.batches, number);
      write_png(path, grid);
      std::cout << " -> " << path << " (" << grid.cols << "x" << grid.rows << ")";
    }
    std::cout << std::endl;
    if (options.window && !show_window(grid, static_cast<std::uint64_t>(number))) break;
  }
  if (options.window) cv::destroyAllWindows();
  return 0;
}

void check_options(ShowOptions& o, const po::variables_map& vars) {
  if (o.batches < 1) throw po::error("--batches must be at least 1");
  if (o.per_batch < 0) throw po::error("--perbatch must not be negative");
  if (o.mode == "img2img") {
    throw po::error(
        "-m img2img (the reference's pairs side by side) is not drawn here: the grid shows the first "
        "image tensor, as -m imgclass");
  }
  if (o.mode != "imgclass") throw po::error("-m '" + o.mode + "': unknown mode (imgclass is the one drawn here)");
  if (o.source.urls.empty()) o.source.urls = {kDefaultUrls};
  o.write = !o.window || !vars["output"].defaulted();
  if (o.write && !cv::haveImageWriter(o.output)) {
    throw po::error("cannot write images named '" + o.output + "': give a name ending in .png");
  }
  if (vars.count("classes")) o.classes = vars["classes"].as<std::string>();
  if (o.window && !has_display()) {
    throw UnavailableError(
        "--window needs a display (neither DISPLAY nor WAYLAND_DISPLAY is set); "
        "leave it out to write a PNG");
  }
}

}  // namespace

int main(int argc, char** argv) {
  return programs::program_main("tensorshow", [&]() -> int {
    ShowOptions o;
    po::options_description options("options");
    options.add_options()("help,h", "show this help")("batches,n", po::value(&o.batches)->default_value(o.batches),
                                                      "batches to show; several go to OUT-000.png, OUT-001.png ...")(
        "output,o", po::value(&o.output)->default_value(o.output), "PNG file to write")(
        "classes,C", po::value<std::string>(),
        "JSON class names: {\"0\": \"tench\", ...} or [\"tench\", ...]; else labels show as numbers")(
        "window", po::bool_switch(&o.window), "show each grid in a window (any key: next, q: quit)")(
        "unbatched,b", po::bool_switch(&o.unbatched), "each message is one sample, not a batch (the reference's -b)")(
        "perbatch,B", po::value(&o.per_batch)->default_value(o.per_batch),
        "draw the first N images of each batch (0: all; the reference showed 1 at a time)")(
        "mode,m", po::value(&o.mode)->default_value(o.mode), "imgclass: images labelled with their classes");
    add_source_options(options, o.source);
    o.source.timeout_hint = kTimeoutHint;
    auto vars = parse_command_line(argc, argv,
                                   "usage: tensorshow [-n N] [-o OUT.png] [-C classes.json] [--window] [URL...]"
                                   "  (default URLs " +
                                       std::string(kDefaultUrls) + ", the reference's; brace-expanded)",
                                   options, o.source);
    if (!vars) return 0;
    check_options(o, *vars);
    return show(o);
  });
}
