#include "mlp_kernels.h"

namespace mlp {

namespace {

constexpr int kThreads = 256;
unsigned blocks(long long n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void average_pool_kernel(const float* x, float* out, int batch, int channels, int height, int width,
                                    int cells) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long features = static_cast<long long>(channels) * cells * cells;
  if (i >= features * batch) return;
  const int b = static_cast<int>(i / features), f = static_cast<int>(i % features);
  const int c = f / (cells * cells), cy = (f / cells) % cells, cx = f % cells;
  const int y0 = cy * height / cells, y1 = (cy + 1) * height / cells;
  const int x0 = cx * width / cells, x1 = (cx + 1) * width / cells;
  const float* plane = x + (static_cast<long long>(b) * channels + c) * height * width;
  float sum = 0;
  for (int y = y0; y < y1; ++y)
    for (int xx = x0; xx < x1; ++xx) sum += plane[y * width + xx];
  out[i] = sum / static_cast<float>((y1 - y0) * (x1 - x0));
}

__global__ void add_bias_kernel(float* m, const float* bias, int rows, long long n, bool relu) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = m[i] + bias[i % rows];
  m[i] = relu ? fmaxf(v, 0.0f) : v;
}

// One thread an example: classes are few enough (about 1000) for a loop.
__global__ void softmax_cross_entropy_kernel(float* logits, const int* labels, float* loss, int classes, int batch) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  float* z = logits + static_cast<long long>(b) * classes;
  int label = labels[b] % classes;
  if (label < 0) label += classes;
  float top = z[0];
  for (int k = 1; k < classes; ++k) top = fmaxf(top, z[k]);
  float sum = 0;
  for (int k = 0; k < classes; ++k) sum += expf(z[k] - top);
  atomicAdd(loss, (logf(sum) - (z[label] - top)) / batch);
  for (int k = 0; k < classes; ++k) z[k] = (expf(z[k] - top) / sum - (k == label ? 1.0f : 0.0f)) / batch;
}

__global__ void relu_backward_kernel(float* dh, const float* h, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && h[i] <= 0.0f) dh[i] = 0.0f;
}

__global__ void row_sums_kernel(const float* m, float* out, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float sum = 0;
  for (int c = 0; c < cols; ++c) sum += m[static_cast<long long>(c) * rows + r];
  out[r] = sum;
}

__global__ void accumulate_kernel(float* dst, const float* src, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] += src[i];
}

__global__ void sgd_kernel(float* w, float* velocity, const float* grad, int n, float lr, float momentum,
                           float weight_decay, float scale) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = momentum * velocity[i] + grad[i] * scale + weight_decay * w[i];
  velocity[i] = v;
  w[i] -= lr * v;
}

}  // namespace

void average_pool(const float* x, float* out, int batch, int channels, int height, int width, int cells,
                  cudaStream_t stream) {
  const long long n = static_cast<long long>(batch) * channels * cells * cells;
  average_pool_kernel<<<blocks(n), kThreads, 0, stream>>>(x, out, batch, channels, height, width, cells);
}

void add_bias(float* m, const float* bias, int rows, int cols, bool relu, cudaStream_t stream) {
  const long long n = static_cast<long long>(rows) * cols;
  add_bias_kernel<<<blocks(n), kThreads, 0, stream>>>(m, bias, rows, n, relu);
}

void softmax_cross_entropy(float* logits, const int* labels, float* loss, int classes, int batch, cudaStream_t stream) {
  softmax_cross_entropy_kernel<<<blocks(batch), kThreads, 0, stream>>>(logits, labels, loss, classes, batch);
}

void relu_backward(float* dh, const float* h, int n, cudaStream_t stream) {
  relu_backward_kernel<<<blocks(n), kThreads, 0, stream>>>(dh, h, n);
}

void row_sums(const float* m, float* out, int rows, int cols, cudaStream_t stream) {
  row_sums_kernel<<<blocks(rows), kThreads, 0, stream>>>(m, out, rows, cols);
}

void accumulate(float* dst, const float* src, int n, cudaStream_t stream) {
  accumulate_kernel<<<blocks(n), kThreads, 0, stream>>>(dst, src, n);
}

void sgd(float* w, float* velocity, const float* grad, int n, float lr, float momentum, float weight_decay, float scale,
         cudaStream_t stream) {
  sgd_kernel<<<blocks(n), kThreads, 0, stream>>>(w, velocity, grad, n, lr, momentum, weight_decay, scale);
}

}  // namespace mlp
