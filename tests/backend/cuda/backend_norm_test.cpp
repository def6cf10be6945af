// CUDA backend: layer_norm and split_qkv (qk-norm and both RoPE pairings)
// against the CPU backend, at the model's shapes (1024 channels, 16 heads of
// 64, one frame of 978 tokens and the 8-frame scale phase; 2048-channel
// float32 rows of the heads) and at small odd shapes that take the kernels'
// element-by-element paths. Which kernel a case reaches is decided by the
// shape, the dtype and the alignment of every pointer (norm.cu's
// layer_norm() and split_qkv()): the misaligned cases below start their
// tensors a few elements into larger buffers to reach the fallbacks.
#include "backend_test_support.h"

#include "model/rope.h"

namespace lingbot::cuda::backend_test {
namespace {

// `host` on the GPU as `dtype`, starting `offset` elements into a larger
// buffer (offset 0: a tensor of its own).
Tensor to_gpu_at(const Tensor& host, DType dtype, int64_t offset) {
  if (offset == 0) return to_gpu(host, dtype);
  Tensor flat = random_host({offset + host.numel()}, 7);
  std::copy_n(host.f32(), host.numel(), flat.f32() + offset);
  return to_gpu(flat, dtype).slice(offset, host.numel()).reshape(host.shape());
}

// A NaN-poisoned GPU tensor starting `offset` elements into a larger buffer.
Tensor poisoned_at(const Shape& shape, DType dtype, int64_t offset) {
  const int64_t n = shape_numel(shape);
  return poisoned({offset + n}, dtype).slice(offset, n).reshape(shape);
}

struct NormCase {
  const char* name;
  int64_t n, c;
  DType dtype;
  bool affine;
  bool in_place;
  float eps;
  bool misaligned = false;  // input/output start one row into a larger tensor
  float mean = 0.0f;        // added to every input value
  double bound = -1;        // default: by dtype
  int64_t affine_offset = 0;  // weight and bias start this many elements into larger buffers
};

TEST(CudaBackendNorm, LayerNormMatchesCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  const NormCase cases[] = {
      {"aggregator 7824x1024 bf16", 7824, 1024, DType::BF16, true, false, 1e-5f},
      {"frame 978x1024 bf16 in place", 978, 1024, DType::BF16, true, true, 1e-5f},
      {"encoder 978x1024 bf16 eps 1e-6", 978, 1024, DType::BF16, true, false, 1e-6f},
      {"dpt rows 7776x2048 f32 in place", 7776, 2048, DType::F32, true, true, 1e-5f},
      {"camera adaln 8x2048 f32 no affine", 8, 2048, DType::F32, false, false, 1e-6f},
      {"wide 16x4096 f32 (three passes, row not cached)", 16, 4096, DType::F32, true, false, 1e-5f},
      {"narrow 6x24 bf16 (one group of 8 per lane at most)", 6, 24, DType::BF16, true, true, 1e-5f},
      {"camera token 1x2048 f32", 1, 2048, DType::F32, true, false, 1e-5f},
      {"odd 5x7 f32", 5, 7, DType::F32, true, false, 1e-5f},
      {"odd 3x1001 bf16 in place", 3, 1001, DType::BF16, true, true, 1e-5f},
      {"misaligned 4x1004 bf16", 4, 1004, DType::BF16, true, false, 1e-5f, true},
      {"misaligned 3x9 f32 in place", 3, 9, DType::F32, false, true, 1e-5f, true},
      // Values around 1000 with a spread of 1: the two-pass variance stays
      // accurate (E[x^2] - mean^2 in float32 would be off by ~10%); the
      // float32 mean of such values is off by ~1e-5 of the spread, hence 1e-4.
      {"large mean 64x1024 f32", 64, 1024, DType::F32, true, false, 1e-5f, false, 1000.0f, 1e-4},
      // Weight and bias not 16-byte aligned: the three-pass kernel with
      // scalar weights instead of the cached one with float4 weights.
      {"misaligned weights 978x1024 bf16", 978, 1024, DType::BF16, true, false, 1e-5f, false, 0.0f, -1, 1},
      {"misaligned weights 8x2048 f32", 8, 2048, DType::F32, true, false, 1e-5f, false, 0.0f, -1, 2},
  };
  uint64_t seed = 1000;
  for (const NormCase& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor x = random_host({c.n, c.c}, seed += 10);
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] += c.mean;
    x = representable(x, c.dtype);
    const Tensor w = random_host({c.c}, seed + 1, 0.5f, 1.5f);
    const Tensor b = random_host({c.c}, seed + 2, -0.5f, 0.5f);
    Tensor expected = cpu_poisoned({c.n, c.c});
    cpu().layer_norm(x, c.affine ? &w : nullptr, c.affine ? &b : nullptr, c.eps, expected);

    Tensor gx;
    if (c.misaligned) {
      Tensor padded = random_host({c.n + 1, c.c}, seed + 3);
      std::copy_n(x.f32(), x.numel(), padded.f32() + c.c);
      gx = to_gpu(padded, c.dtype).slice(1, c.n);
    } else {
      gx = to_gpu(x, c.dtype);
    }
    const Tensor gw = to_gpu_at(w, DType::F32, c.affine_offset), gb = to_gpu_at(b, DType::F32, c.affine_offset);
    Tensor out = c.in_place ? gx : poisoned({c.n, c.c}, c.dtype);
    gpu().layer_norm(gx, c.affine ? &gw : nullptr, c.affine ? &gb : nullptr, c.eps, out);
    const double bound = c.bound > 0 ? c.bound : (c.dtype == DType::BF16 ? kBf16Bound : kFp32Bound);
    EXPECT_TRUE(matches(out, expected, bound, c.name));
  }
}

// The output type may differ from the input's: a float32 residual stream
// normalised straight into a bfloat16 matrix-product input, and back.
TEST(CudaBackendNorm, LayerNormConvertsBetweenTypes) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    int64_t n, c;
    DType in, out;
  };
  const Case cases[] = {
      {"978x1024 f32 -> bf16", 978, 1024, DType::F32, DType::BF16},
      {"978x1024 bf16 -> f32", 978, 1024, DType::BF16, DType::F32},
      {"scale phase 7824x1024 f32 -> bf16", 7824, 1024, DType::F32, DType::BF16},
      {"narrow 5x40 f32 -> bf16 (5 of 32 lanes hold a group)", 5, 40, DType::F32, DType::BF16},
      {"heads 16x2048 bf16 -> f32 (8 groups per lane)", 16, 2048, DType::BF16, DType::F32},
      {"odd 3x1001 f32 -> bf16", 3, 1001, DType::F32, DType::BF16},
  };
  uint64_t seed = 1500;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor x = representable(random_host({c.n, c.c}, seed += 10), c.in);
    const Tensor w = random_host({c.c}, seed + 1, 0.5f, 1.5f);
    const Tensor b = random_host({c.c}, seed + 2, -0.5f, 0.5f);
    Tensor expected = cpu_poisoned({c.n, c.c});
    cpu().layer_norm(x, &w, &b, 1e-5f, expected);
    const Tensor gw = to_gpu(w, DType::F32), gb = to_gpu(b, DType::F32);
    Tensor out = poisoned({c.n, c.c}, c.out);
    gpu().layer_norm(to_gpu(x, c.in), &gw, &gb, 1e-5f, out);
    EXPECT_TRUE(matches(out, expected, c.out == DType::BF16 ? kBf16Bound : kFp32Bound, c.name));
  }
}

enum class Table { None, Rope2d, Rope3d, Random };

struct SplitCase {
  const char* name;
  int64_t n;
  int heads, head_dim;
  DType dtype;
  bool norm;
  Table table;
  RopeTable::Pairs pairs = RopeTable::Pairs::HalfSplit;
  int64_t table_rows = 0;   // Random tables
  int64_t first_frame = 0;  // Rope3d
  int frames = 1;           // Rope3d
  int64_t offset = 0;       // qkv, q, k and v start this many elements into larger buffers
};

// The aggregator's frame: 6 special tokens and a 27 x 36 patch grid (378 x 504 input).
constexpr FrameGrid kGrid{6, 27, 36};

TEST(CudaBackendNorm, SplitQkvMatchesCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  using P = RopeTable::Pairs;
  const SplitCase cases[] = {
      {"frame block 978 bf16 qk-norm 2D rope", 978, 16, 64, DType::BF16, true, Table::Rope2d},
      {"scale phase 7824 bf16 qk-norm 2D rope (table per frame)", 7824, 16, 64, DType::BF16, true, Table::Rope2d},
      {"scale phase 7824 bf16 qk-norm 3D rope", 7824, 16, 64, DType::BF16, true, Table::Rope3d, P::Interleaved, 0, 0, 8},
      {"streaming 978 bf16 qk-norm 3D rope at frame 100", 978, 16, 64, DType::BF16, true, Table::Rope3d,
       P::Interleaved, 0, 100, 1},
      {"encoder 1954 bf16 plain split", 1954, 16, 64, DType::BF16, false, Table::None},
      {"camera head 8 f32 16 x 128 plain split", 8, 16, 128, DType::F32, false, Table::None},
      {"978 f32 qk-norm only", 978, 16, 64, DType::F32, true, Table::None},
      {"978 f32 3D rope only", 978, 16, 64, DType::F32, false, Table::Rope3d, P::Interleaved, 0, 3, 1},
      {"978 f32 2D rope only", 978, 16, 64, DType::F32, false, Table::Rope2d},
      {"odd 5 f32 3 x 8 half-split, 3 table rows", 5, 3, 8, DType::F32, true, Table::Random, P::HalfSplit, 3},
      {"odd 4 bf16 3 x 12 interleaved (unaligned rows)", 4, 3, 12, DType::BF16, true, Table::Random, P::Interleaved, 4},
      {"odd 7 bf16 2 x 4 half-split, 1 table row", 7, 2, 4, DType::BF16, false, Table::Random, P::HalfSplit, 1},
      // Head dim 64 in 16-byte packs (4 heads per warp for bf16, 2 for f32):
      // float32 with both RoPE layouts after qk-norm, and item counts
      // (tokens x heads = 15) that leave part of the last warp without an
      // item of its own.
      {"978 f32 qk-norm 2D rope", 978, 16, 64, DType::F32, true, Table::Rope2d},
      {"978 f32 qk-norm 3D rope", 978, 16, 64, DType::F32, true, Table::Rope3d, P::Interleaved, 0, 5, 1},
      {"978 bf16 2D rope only", 978, 16, 64, DType::BF16, false, Table::Rope2d},
      {"odd 5 bf16 3 x 64 qk-norm half-split, 3 table rows", 5, 3, 64, DType::BF16, true, Table::Random,
       P::HalfSplit, 3},
      {"odd 5 bf16 3 x 64 qk-norm interleaved, 2 table rows", 5, 3, 64, DType::BF16, true, Table::Random,
       P::Interleaved, 2},
      {"odd 5 f32 3 x 64 qk-norm half-split, 4 table rows", 5, 3, 64, DType::F32, true, Table::Random, P::HalfSplit,
       4},
      {"odd 5 f32 3 x 64 interleaved, 1 table row", 5, 3, 64, DType::F32, false, Table::Random, P::Interleaved, 1},
      // Head dim 64 with views not 16-byte aligned, by a whole pair of
      // elements or by one: the generic kernel.
      {"misaligned 978 bf16 qk-norm 2D rope (pairs)", 978, 16, 64, DType::BF16, true, Table::Rope2d, P::HalfSplit, 0,
       0, 1, 2},
      {"misaligned 978 f32 qk-norm 3D rope (pairs)", 978, 16, 64, DType::F32, true, Table::Rope3d, P::Interleaved, 0,
       2, 1, 2},
      {"misaligned 978 bf16 plain split (pairs)", 978, 16, 64, DType::BF16, false, Table::None, P::HalfSplit, 0, 0, 1,
       6},
      {"misaligned 7 bf16 3 x 64 qk-norm half-split (one element off)", 7, 3, 64, DType::BF16, true, Table::Random,
       P::HalfSplit, 2, 0, 1, 1},
      {"misaligned 7 f32 3 x 64 interleaved (one element off)", 7, 3, 64, DType::F32, false, Table::Random,
       P::Interleaved, 2, 0, 1, 1},
  };
  uint64_t seed = 2000;
  for (const SplitCase& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t C = int64_t{c.heads} * c.head_dim;
    const Tensor qkv = representable(random_host({c.n, 3 * C}, seed += 10, -2.0f, 2.0f), c.dtype);

    // qk-norm parameters; the k bias is left out to cover a missing one.
    const Tensor qw = random_host({c.head_dim}, seed + 1, 0.5f, 1.5f);
    const Tensor qb = random_host({c.head_dim}, seed + 2, -0.5f, 0.5f);
    const Tensor kw = random_host({c.head_dim}, seed + 3, 0.5f, 1.5f);
    QkNorm host_norm{&qw, &qb, &kw, nullptr, 1e-5f};
    const Tensor gqw = to_gpu(qw, DType::F32), gqb = to_gpu(qb, DType::F32), gkw = to_gpu(kw, DType::F32);
    QkNorm dev_norm{&gqw, &gqb, &gkw, nullptr, 1e-5f};

    RopeTable host_rope;
    host_rope.pairs = c.pairs;
    if (c.table == Table::Rope2d) {
      rope2d_table(kGrid, c.head_dim, 100.0, host_rope.cos, host_rope.sin);
    } else if (c.table == Table::Rope3d) {
      rope3d_table(kGrid, c.head_dim, {20, 22, 22}, 10000.0, c.first_frame, c.frames, host_rope.cos, host_rope.sin);
    } else if (c.table == Table::Random) {
      host_rope.cos = random_host({c.table_rows, c.head_dim / 2}, seed + 4);
      host_rope.sin = random_host({c.table_rows, c.head_dim / 2}, seed + 5);
    }
    const bool rope = c.table != Table::None;
    RopeTable dev_rope;
    if (rope) dev_rope = RopeTable{to_gpu(host_rope.cos, DType::F32), to_gpu(host_rope.sin, DType::F32), c.pairs};

    Tensor q = cpu_poisoned({c.n, C}), k = cpu_poisoned({c.n, C}), v = cpu_poisoned({c.n, C});
    cpu().split_qkv(qkv, c.heads, c.head_dim, c.norm ? &host_norm : nullptr, rope ? &host_rope : nullptr, q, k, v);

    Tensor gq = poisoned_at({c.n, C}, c.dtype, c.offset), gk = poisoned_at({c.n, C}, c.dtype, c.offset),
           gv = poisoned_at({c.n, C}, c.dtype, c.offset);
    gpu().split_qkv(to_gpu_at(qkv, c.dtype, c.offset), c.heads, c.head_dim, c.norm ? &dev_norm : nullptr,
                    rope ? &dev_rope : nullptr, gq, gk, gv);
    const double bound = c.dtype == DType::BF16 ? kBf16Bound : kFp32Bound;
    EXPECT_TRUE(matches(gq, q, bound, std::string(c.name) + ": q"));
    EXPECT_TRUE(matches(gk, k, bound, std::string(c.name) + ": k"));
    EXPECT_TRUE(matches(gv, v, kExactBound, std::string(c.name) + ": v"));
  }
}

}  // namespace
}  // namespace lingbot::cuda::backend_test
