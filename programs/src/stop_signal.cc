#include <csignal>

#include "tensorcom/programs/program.h"

namespace tensorcom::programs {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signal) { g_stop_signal = signal; }

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() noexcept { return g_stop_signal != 0; }

}  // namespace tensorcom::programs
