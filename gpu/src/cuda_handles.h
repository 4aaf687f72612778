// Move-only owners of CUDA runtime handles, and the one place where CUDA
// error codes become tensorcom errors. Internal to libtensorcom.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "tensorcom/codec/error.h"

namespace tensorcom::detail {

// Throws Error "<what>: <CUDA's name>: <CUDA's words>" unless status is cudaSuccess.
inline void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw Error(what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
}

// Makes `device` current for its scope, restoring the previous device after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

// A handle plus the function that frees it; null when empty or moved from.
template <class Handle, cudaError_t (*Free)(Handle)>
class CudaHandle {
 public:
  CudaHandle() = default;
  explicit CudaHandle(Handle handle) noexcept : handle_(handle) {}
  CudaHandle(CudaHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CudaHandle& operator=(CudaHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ~CudaHandle() { reset(); }
  [[nodiscard]] Handle get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  void reset() noexcept {
    if (handle_ != nullptr) Free(handle_);  // errors at teardown have nowhere to go
    handle_ = nullptr;
  }

 private:
  Handle handle_ = nullptr;
};

// A handle made by a cudaXxxCreateWithFlags call with fixed flags, on the
// current device.
template <class Handle, cudaError_t (*Create)(Handle*, unsigned), cudaError_t (*Destroy)(Handle), unsigned kFlags>
class FlaggedHandle {
 public:
  FlaggedHandle() = default;
  [[nodiscard]] static FlaggedHandle create() {
    Handle h = nullptr;
    check_cuda(Create(&h, kFlags), "creating a CUDA stream or event");
    FlaggedHandle out;
    out.handle_ = CudaHandle<Handle, Destroy>(h);
    return out;
  }
  [[nodiscard]] Handle get() const noexcept { return handle_.get(); }

 private:
  CudaHandle<Handle, Destroy> handle_;
};

// A stream that does not synchronise with the legacy default stream.
using Stream = FlaggedHandle<cudaStream_t, cudaStreamCreateWithFlags, cudaStreamDestroy, cudaStreamNonBlocking>;
// An event without timing (cheaper to record and wait on).
using Event = FlaggedHandle<cudaEvent_t, cudaEventCreateWithFlags, cudaEventDestroy, cudaEventDisableTiming>;

// Page-locked host memory (cudaHostAlloc, portable to every device).
inline void* allocate_pinned(std::size_t size) {
  void* p = nullptr;
  check_cuda(cudaHostAlloc(&p, size, cudaHostAllocPortable),
             "cudaHostAlloc of " + std::to_string(size) + " pinned bytes");
  return p;
}

// Device memory on the current device (cudaMalloc).
inline void* allocate_device(std::size_t size) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, size), "cudaMalloc of " + std::to_string(size) + " bytes");
  return p;
}

// A block of `size` bytes from Allocate, given back with Free.
template <void* (*Allocate)(std::size_t), cudaError_t (*Free)(void*)>
class CudaMemory {
 public:
  CudaMemory() = default;
  [[nodiscard]] static CudaMemory allocate(std::size_t size) {
    CudaMemory out;
    out.memory_ = CudaHandle<void*, Free>(Allocate(size));
    out.size_ = size;
    return out;
  }
  [[nodiscard]] std::byte* data() const noexcept { return static_cast<std::byte*>(memory_.get()); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  CudaHandle<void*, Free> memory_;
  std::size_t size_ = 0;
};

using PinnedBuffer = CudaMemory<allocate_pinned, cudaFreeHost>;
using DeviceBuffer = CudaMemory<allocate_device, cudaFree>;

}  // namespace tensorcom::detail
