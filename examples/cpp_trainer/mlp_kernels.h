// The kernels of the example MLP: everything cuBLAS does not do. Matrices are
// column-major, one column an example. Each function queues its kernel on
// `stream` and returns at once.
#pragma once

#include <cuda_runtime.h>

namespace mlp {

// x (B, C, H, W) float -> out (F = C*S*S) x B: the mean of each of S x S cells.
void average_pool(const float* x, float* out, int batch, int channels, int height, int width, int cells,
                  cudaStream_t stream);
// m (rows x cols) += bias per row, then max(0, .) when relu.
void add_bias(float* m, const float* bias, int rows, int cols, bool relu, cudaStream_t stream);
// Softmax cross-entropy of logits (classes x B) against labels (mod classes):
// adds the mean loss to *loss and overwrites logits with d(mean loss)/d(logits).
void softmax_cross_entropy(float* logits, const int* labels, float* loss, int classes, int batch, cudaStream_t stream);
// dh *= (h > 0): the ReLU's backward, given its output h.
void relu_backward(float* dh, const float* h, int n, cudaStream_t stream);
// out[r] = sum over columns of m (rows x cols).
void row_sums(const float* m, float* out, int rows, int cols, cudaStream_t stream);
// dst += src.
void accumulate(float* dst, const float* src, int n, cudaStream_t stream);
// SGD with momentum and weight decay on gradients scaled by `scale`.
void sgd(float* w, float* velocity, const float* grad, int n, float lr, float momentum, float weight_decay, float scale,
         cudaStream_t stream);

}  // namespace mlp
