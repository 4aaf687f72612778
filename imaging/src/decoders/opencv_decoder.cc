#include "decoders/opencv_decoder.h"

#include <opencv2/imgproc.hpp>
#if TENSORCOM_OPENCV_CODECS
#include <opencv2/imgcodecs.hpp>
#endif

#include <string>

#include "tensorcom/imaging/problem.h"

namespace tensorcom::imaging {

namespace {

// Any decoded OpenCV image as 8-bit RGB, or RGBX (four bytes a pixel, as
// the JPEG decoder gives them) when padded: one conversion either way.
cv::Mat to_8bit(const cv::Mat& image, bool padded) {
  cv::Mat eight = image;
  if (image.depth() == CV_16U) {
    image.convertTo(eight, CV_8U, 1.0 / 257.0);
  } else if (image.depth() != CV_8U) {
    throw ImageError(Problem::kUndecodable, "unsupported pixel depth " + std::to_string(image.depth()));
  }
  cv::Mat out;
  switch (eight.channels()) {
    case 1: cv::cvtColor(eight, out, padded ? cv::COLOR_GRAY2RGBA : cv::COLOR_GRAY2RGB); break;
    case 3: cv::cvtColor(eight, out, padded ? cv::COLOR_BGR2RGBA : cv::COLOR_BGR2RGB); break;
    case 4: cv::cvtColor(eight, out, padded ? cv::COLOR_BGRA2RGBA : cv::COLOR_BGRA2RGB); break;
    default: throw ImageError(Problem::kUndecodable, std::to_string(eight.channels()) + " channels");
  }
  return out;
}

// Resizes src into the output and flips it if asked.
void resize_into(const cv::Mat& src, Size output, bool flip, std::uint8_t* out) {
  cv::Mat dst(output.height, output.width, CV_8UC3, out);
  cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
  if (dst.data != out) throw Error("resize reallocated its output");  // cannot happen: same size and type
  if (flip) cv::flip(dst, dst, 1);
}

}  // namespace

Size OpenCvDecoder::open(std::span<const std::byte> encoded) {
  // Checked before decoding: a PNG of a few hundred kilobytes can declare
  // gigabytes of pixels, and OpenCV's decoders of other formats are not for
  // outside input (see format.h).
  const auto declared = peek_image_size(encoded);
  if (!declared) throw ImageError(Problem::kUndecodable, "a malformed image header");
  context_.check_pixels(declared->width, declared->height);
#if TENSORCOM_OPENCV_CODECS
  cv::Mat raw(1, static_cast<int>(encoded.size()), CV_8U, const_cast<std::byte*>(encoded.data()));
  const auto start = std::chrono::steady_clock::now();
  try {
    image_ = cv::imdecode(raw, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    throw ImageError(Problem::kUndecodable, e.what());
  }
  context_.decode_time += std::chrono::steady_clock::now() - start;
#else
  // A JPEG-only build (-Dopencv_codecs=disabled) has no decoder for others.
  throw ImageError(Problem::kUndecodable, std::string(format_name(sniff_format(encoded))) +
                                              " image: this build decodes JPEG only (-Dopencv_codecs=disabled)");
#endif
  if (image_.empty()) throw ImageError(Problem::kUndecodable, "not an image OpenCV can read");
  context_.check_pixels(static_cast<std::uint64_t>(image_.cols), static_cast<std::uint64_t>(image_.rows));
  return {image_.cols, image_.rows};
}

void OpenCvDecoder::render(std::span<const std::byte> /*encoded: decoded by open()*/, const Transform& t,
                           std::uint8_t* out) {
  if (context_.options.resample == Resample::kFast) {
    const PixelBox box = t.source_box();
    const cv::Mat rgb = to_8bit(image_(cv::Rect(box.x, box.y, box.width, box.height)), false);
    resize_into(rgb, t.output(), t.flip, out);
    return;
  }
  const PixelBox& box = t.crop;
  const cv::Mat rgbx = to_8bit(image_(cv::Rect(box.x, box.y, box.width, box.height)), true);
  axes_.plan(context_.filter(), {image_.cols, image_.rows}, t, 8);
  context_.pillow.resize_to_rgb(rgbx.ptr<std::uint8_t>(0), rgbx.step, box.x - axes_.origin_x, box.y - axes_.origin_y,
                                axes_.x, axes_.y, t.flip, out);
}

void OpenCvDecoder::decode_whole(std::span<const std::byte> /*encoded: decoded by open()*/, std::uint8_t* out) {
  const cv::Mat rgb = to_8bit(image_, false);
  cv::Mat into(rgb.rows, rgb.cols, CV_8UC3, out);
  rgb.copyTo(into);
}

}  // namespace tensorcom::imaging
