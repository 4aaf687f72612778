// GpuFeeder in a build without CUDA: the same API, reporting that GPU
// feeding is not available. No DeviceBatch with data can exist here, so the
// batch operations have nothing to do.
#include "feeder_common.h"
#include "tensorcom/gpu/gpu_feeder.h"

namespace tensorcom {

bool gpu_feeding_available() noexcept { return false; }

int gpu_device_count() { throw UnavailableError(detail::kNoCudaMessage); }

void convert_images(const DeviceTensor&, const DeviceTensor&, const ImageConversion&, GpuStream) {
  throw UnavailableError(detail::kNoCudaMessage);
}

void DeviceBatch::wait(GpuStream) const {}
void DeviceBatch::record_stream(GpuStream) const {}
void DeviceBatch::synchronize() const {}
GpuEvent DeviceBatch::ready_event() const noexcept { return nullptr; }

class GpuFeeder::Impl {};

GpuFeeder::GpuFeeder(std::vector<std::unique_ptr<BatchSource>>, GpuFeederOptions) {
  throw UnavailableError(detail::kNoCudaMessage);
}
GpuFeeder::GpuFeeder(GpuFeeder&&) noexcept = default;
GpuFeeder& GpuFeeder::operator=(GpuFeeder&&) noexcept = default;
GpuFeeder::~GpuFeeder() = default;

// Unreachable: no GpuFeeder can be constructed.
std::optional<DeviceBatch> GpuFeeder::next(std::size_t, std::optional<Milliseconds>) {
  throw UnavailableError(detail::kNoCudaMessage);
}
bool GpuFeeder::finished(std::size_t) const { throw UnavailableError(detail::kNoCudaMessage); }
std::size_t GpuFeeder::lanes() const noexcept { return 0; }
const GpuFeederOptions& GpuFeeder::options() const noexcept {
  static const GpuFeederOptions none;
  return none;
}
GpuFeederStats GpuFeeder::stats() const { return {}; }
GpuStream GpuFeeder::stream(std::size_t) const { throw UnavailableError(detail::kNoCudaMessage); }

}  // namespace tensorcom
