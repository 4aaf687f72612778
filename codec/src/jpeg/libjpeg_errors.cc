#include "jpeg/libjpeg_errors.h"

#include <jerror.h>

#include <cstring>

namespace tensorcom::jpeg {

namespace {

LibjpegErrors& errors_of(j_common_ptr cinfo) { return *reinterpret_cast<LibjpegErrors*>(cinfo->err); }

[[noreturn]] void jump_with_message(j_common_ptr cinfo) {
  (*cinfo->err->format_message)(cinfo, errors_of(cinfo).message);
  std::longjmp(errors_of(cinfo).jump, 1);
}

void on_error_exit(j_common_ptr cinfo) { jump_with_message(cinfo); }

void on_emit_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) jump_with_message(cinfo);
  ++cinfo->err->num_warnings;  // damaged data decoding went past, as libjpeg's own handler counts it
}

// libjpeg calls this while it consumes input, at least once a scan.
void on_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  LibjpegErrors& errors = errors_of(cinfo);
  if (d->input_scan_number > errors.max_scans) {
    // No std::string here: longjmp skips destructors.
    errors.too_many_scans = true;
    std::snprintf(errors.message, sizeof errors.message, "more than %d scans (a progressive scan bomb?)",
                  errors.max_scans);
    std::longjmp(errors.jump, 1);
  }
}

}  // namespace

void use_libjpeg_errors(jpeg_common_struct* cinfo, LibjpegErrors& errors) {
  cinfo->err = jpeg_std_error(&errors.pub);
  errors.pub.error_exit = on_error_exit;
  errors.pub.emit_message = on_emit_message;
}

void limit_scans(jpeg_decompress_struct* cinfo, LibjpegErrors& errors) {
  errors.progress = {};
  errors.progress.progress_monitor = on_progress;
  cinfo->progress = &errors.progress;
}

}  // namespace tensorcom::jpeg
