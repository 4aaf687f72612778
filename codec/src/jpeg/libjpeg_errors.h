// Internal to the project's libjpeg users (the servers' region decoder, the
// compressed images of the wire and make-shards' restart-marker rewriter):
// one policy for libjpeg's errors and warnings, and one bound on the work a
// hostile file can ask for.
//
// libjpeg reports errors by calling error_exit, which must not return: here
// it formats the message and longjmps to the caller's setjmp(jump). So that
// no destructor is skipped, the functions that call libjpeg between a setjmp
// and its return hold only trivially destructible locals.
#pragma once

// jpeglib.h needs FILE and size_t declared first.
#include <csetjmp>
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

namespace tensorcom::jpeg {

// Most real progressive JPEGs have about 10 scans; each scan of a progressive
// file makes libjpeg walk every coefficient of the image again, so a small
// file with thousands of scans costs seconds (libjpeg-turbo's advice for
// untrusted input is to cap them: its own tools take -maxscans).
inline constexpr int kDefaultMaxScans = 100;

struct LibjpegErrors {
  jpeg_error_mgr pub;  // first: libjpeg sees only this part
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  int max_scans = kDefaultMaxScans;
  bool too_many_scans = false;  // set when the scan limit stopped a file; the caller resets it
};

// Makes `cinfo` report through `errors`: errors longjmp to errors.jump with
// the message in errors.message; a premature end of data (a truncated file,
// which libjpeg would pad with grey) is an error too; other warnings leave a
// usable image, as in PIL, and are ignored. Call before jpeg_create_*.
// `errors` must outlive cinfo's use.
void use_libjpeg_errors(jpeg_common_struct* cinfo, LibjpegErrors& errors);

// Installs a progress monitor that fails a file with more than
// errors.max_scans scans. Call after jpeg_create_decompress (which clears
// the progress field). REQUIRES: use_libjpeg_errors(cinfo, errors) before.
void limit_scans(jpeg_decompress_struct* cinfo, LibjpegErrors& errors);

}  // namespace tensorcom::jpeg
