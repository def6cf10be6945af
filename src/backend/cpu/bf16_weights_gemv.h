// Float32 products of weights kept in bfloat16 (camera_head_weights bf16):
// the camera head's matrices halve their memory while its activations and
// sums stay float32. A bf16 weight widens exactly to float32 (its bits are a
// float32's high half), so the arithmetic is a float32 product on the
// rounded weights. The camera head multiplies a handful of rows (one token
// per frame), so the product streams each weight row once per pass of up to
// kRowsPerPass rows, as a matrix-vector product: bound by the weights' bytes,
// which bf16 halves.
#pragma once

#include <cstdint>

namespace lingbot::cpu {

inline constexpr int64_t kBf16WeightsRowsPerPass = 8;

// out[r, c] (accumulate ? += : =) sum_k x[r, k] w[c, k] + bias[c] for r < n,
// c < m: x [n, k] float32, w [m, k] bfloat16 bits, bias [m] or null.
void bf16_weights_gemv(const float* x, int64_t n, int64_t k, const uint16_t* w, int64_t m, const float* bias,
                       float* out, bool accumulate);

}  // namespace lingbot::cpu
