#include "http_stream.h"

#include <curl/curl.h>

#include <cerrno>
#include <utility>

#include "tensorcom/codec/error.h"
#include "tensorcom/formats/printable.h"

namespace tensorcom::formats::detail {

namespace {

using Clock = HttpStream::Clock;

// How long one wait for the socket lasts: also how often `cancelled` and the
// stall timeout are checked.
constexpr int kPollMs = 100;

struct EasyCleanup {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};
struct MultiCleanup {
  void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
};
using EasyPtr = std::unique_ptr<CURL, EasyCleanup>;
using MultiPtr = std::unique_ptr<CURLM, MultiCleanup>;

// curl_global_init is not thread-safe in every libcurl; a function-local
// static runs it once, whichever thread opens the first URL. It is never
// undone: other threads may still be fetching at exit.
void init_curl_once() {
  static const CURLcode result = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (result != CURLE_OK) throw IoError(std::string("cannot set up libcurl: ") + curl_easy_strerror(result), EIO);
}

// Transfers that may succeed if fetched again: everything but a bad URL or
// protocol, a redirect loop, and TLS certificate refusals.
bool is_retryable(CURLcode result) {
  switch (result) {
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_LOGIN_DENIED:
    case CURLE_NOT_BUILT_IN: return false;
    default: return true;
  }
}

// A server error or overload is worth another try; a missing or forbidden
// shard is not.
bool is_retryable_status(long status) { return status == 408 || status == 429 || status >= 500; }

void set_or_throw(CURLcode result, const char* what) {
  if (result != CURLE_OK) throw IoError(std::string("cannot set ") + what + ": " + curl_easy_strerror(result), EINVAL);
}

}  // namespace

struct HttpStream::Handles {
  MultiPtr multi;  // declared first, so destroyed after the easy handle
  EasyPtr easy;
  char error[CURL_ERROR_SIZE] = {};

  Handles() {
    init_curl_once();
    multi.reset(curl_multi_init());
    easy.reset(curl_easy_init());
    if (!multi || !easy) throw IoError("cannot create a libcurl handle", ENOMEM);
  }
  ~Handles() {
    // A handle still in its multi must leave it before either is cleaned up
    // (curl accepts the removal of one that never joined).
    curl_multi_remove_handle(multi.get(), easy.get());
  }
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
};

HttpStream::HttpStream(const std::string& url, const HttpShardOptions& options, const std::function<bool()>& cancelled)
    : url_(redacted_url(url)), options_(options), cancelled_(cancelled), handles_(std::make_unique<Handles>()) {
  CURL* easy = handles_->easy.get();
  set_or_throw(curl_easy_setopt(easy, CURLOPT_URL, url.c_str()), "the URL");
  // A redirect must not lead to file:// or another protocol curl speaks.
  set_or_throw(curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https"), "the protocols");
  set_or_throw(curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"), "the redirect protocols");
  set_or_throw(curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L), "redirects");
  set_or_throw(curl_easy_setopt(easy, CURLOPT_MAXREDIRS, static_cast<long>(options_.max_redirects)), "redirects");
  set_or_throw(curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout.count())),
               "the connect timeout");
  // Statuses of 400 and over end the transfer before any body is taken.
  set_or_throw(curl_easy_setopt(easy, CURLOPT_FAILONERROR, 1L), "fail-on-error");
  // Timeouts without SIGALRM: the reader shares its process with other threads.
  set_or_throw(curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L), "no-signal");
  set_or_throw(curl_easy_setopt(easy, CURLOPT_USERAGENT, "tensorcom"), "the user agent");
  set_or_throw(curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, handles_->error), "the error buffer");
  set_or_throw(curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &HttpStream::on_body), "the body callback");
  set_or_throw(curl_easy_setopt(easy, CURLOPT_WRITEDATA, this), "the body callback");
  if (CURLMcode code = curl_multi_add_handle(handles_->multi.get(), easy); code != CURLM_OK)
    throw IoError(std::string("cannot start a transfer: ") + curl_multi_strerror(code), EIO);
}

HttpStream::~HttpStream() = default;

std::optional<std::span<const std::byte>> HttpStream::read() {
  handed_.clear();  // the caller is done with the last block
  if (paused_ && !failure_) resume();
  const Clock::time_point waiting_since = Clock::now();
  Clock::time_point mark = waiting_since;
  while (filling_.empty() && !finished_ && !failure_) {
    const Clock::time_point now = Clock::now();
    waited_ += now - mark;
    mark = now;
    if (cancelled_ && cancelled_()) {
      fail(url_ + ": stopped", false);
    } else if (now - waiting_since >= options_.stall_timeout) {
      fail(url_ + ": no data for " + std::to_string(options_.stall_timeout.count()) + " ms (stall timeout)", true);
    } else {
      check_pace(now);
      if (!failure_) drive();
    }
  }
  waited_ += Clock::now() - mark;
  window_bytes_ += filling_.size();
  if (!failure_) check_pace(Clock::now());
  // Bytes that came before a failure are still handed out: they may finish a sample.
  if (filling_.empty() && failure_) return std::nullopt;
  handed_.swap(filling_);
  return std::span<const std::byte>(handed_);
}

std::size_t HttpStream::on_body(char* data, std::size_t size, std::size_t count, void* self_pointer) {
  auto* self = static_cast<HttpStream*>(self_pointer);
  // curl calls this for the final response only (not for redirects), so a
  // status outside 2xx here is one FAILONERROR let through (a 3xx without a
  // Location): its body is no shard.
  long status = 0;
  curl_easy_getinfo(self->handles_->easy.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    self->fail(self->url_ + ": HTTP status " + std::to_string(status), false);
    return 0;  // ends the transfer
  }
  if (self->filling_.size() >= kHighWater) {
    self->paused_ = true;  // curl keeps this chunk and offers it again on resume()
    return CURL_WRITEFUNC_PAUSE;
  }
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  self->filling_.insert(self->filling_.end(), bytes, bytes + size * count);
  return size * count;
}

void HttpStream::drive() {
  CURLM* multi = handles_->multi.get();
  int running = 0;
  if (CURLMcode code = curl_multi_perform(multi, &running); code != CURLM_OK) {
    fail(url_ + ": " + curl_multi_strerror(code), true);
    return;
  }
  take_result();
  if (!filling_.empty() || finished_ || failure_) return;
  if (CURLMcode code = curl_multi_poll(multi, nullptr, 0, kPollMs, nullptr); code != CURLM_OK)
    fail(url_ + ": " + curl_multi_strerror(code), true);
}

void HttpStream::take_result() {
  int left = 0;
  while (CURLMsg* message = curl_multi_info_read(handles_->multi.get(), &left)) {
    if (message->msg != CURLMSG_DONE) continue;
    const CURLcode result = message->data.result;
    if (result == CURLE_OK) {
      finished_ = true;
    } else if (!failure_) {  // on_body's own verdict, if any, says more than "write error"
      if (result == CURLE_HTTP_RETURNED_ERROR) {
        long status = 0;
        curl_easy_getinfo(handles_->easy.get(), CURLINFO_RESPONSE_CODE, &status);
        fail(url_ + ": HTTP status " + std::to_string(status), is_retryable_status(status));
      } else {
        const char* detail = handles_->error[0] ? handles_->error : curl_easy_strerror(result);
        fail(url_ + ": " + printable(detail), is_retryable(result));
      }
    }
  }
}

void HttpStream::check_pace(Clock::time_point now) {
  const auto& o = options_;
  if (o.max_transfer_time.count() > 0 && now - started_ >= o.max_transfer_time) {
    fail(url_ + ": still transferring after " + std::to_string(o.max_transfer_time.count()) +
             " ms (the most a transfer may take)",
         false);
    return;
  }
  if (o.min_bytes_per_second == 0 || o.rate_window.count() <= 0 || waited_ < o.rate_window) return;
  const double seconds = std::chrono::duration<double>(waited_).count();
  if (static_cast<double>(window_bytes_) < static_cast<double>(o.min_bytes_per_second) * seconds) {
    fail(url_ + ": " + std::to_string(window_bytes_) + " bytes in " + std::to_string(static_cast<long>(seconds)) +
             " s of waiting, slower than the minimum of " + std::to_string(o.min_bytes_per_second) + " bytes/s",
         true);
    return;
  }
  waited_ = {};
  window_bytes_ = 0;
}

void HttpStream::fail(std::string message, bool retryable) {
  if (!failure_) failure_ = HttpFailure{std::move(message), retryable};
}

void HttpStream::resume() {
  paused_ = false;
  // curl may hand over the chunk it kept right here, through on_body.
  if (CURLcode code = curl_easy_pause(handles_->easy.get(), CURLPAUSE_CONT); code != CURLE_OK)
    fail(url_ + ": cannot resume the transfer: " + curl_easy_strerror(code), true);
}

}  // namespace tensorcom::formats::detail
