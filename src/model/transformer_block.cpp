#include "model/transformer_block.h"

#include "core/profiler.h"

namespace lingbot {

BlockWeights BlockWeights::bind(const DeviceWeights& w, const std::string& p, int dim, int num_heads, bool qk_norm,
                                float norm_eps) {
  BlockWeights b;
  b.norm1_w = &w.get(p + ".norm1.weight");
  b.norm1_b = &w.get(p + ".norm1.bias");
  b.qkv_w = &w.get(p + ".attn.qkv.weight");
  b.qkv_b = &w.get(p + ".attn.qkv.bias");
  b.has_qk_norm = qk_norm;
  if (qk_norm) {
    b.qk_norm.q_weight = &w.get(p + ".attn.q_norm.weight");
    b.qk_norm.q_bias = &w.get(p + ".attn.q_norm.bias");
    b.qk_norm.k_weight = &w.get(p + ".attn.k_norm.weight");
    b.qk_norm.k_bias = &w.get(p + ".attn.k_norm.bias");
    b.qk_norm.eps = 1e-5f;  // nn.LayerNorm default inside upstream's Attention
  }
  b.proj_w = &w.get(p + ".attn.proj.weight");
  b.proj_b = &w.get(p + ".attn.proj.bias");
  b.norm2_w = &w.get(p + ".norm2.weight");
  b.norm2_b = &w.get(p + ".norm2.bias");
  b.fc1_w = &w.get(p + ".mlp.fc1.weight");
  b.fc1_b = &w.get(p + ".mlp.fc1.bias");
  b.fc2_w = &w.get(p + ".mlp.fc2.weight");
  b.fc2_b = &w.get(p + ".mlp.fc2.bias");
  b.dim = dim;
  b.num_heads = num_heads;
  b.head_dim = dim / num_heads;
  b.hidden = static_cast<int>(b.fc1_w->dim(0));
  b.norm_eps = norm_eps;
  b.activations = b.qkv_w->dtype();
  return b;
}

void run_block(Backend& be, Workspace& ws, const BlockWeights& w, Tensor& x, const RopeTable* rope,
               const AttendFn& attend, const std::string& tag, const std::string& label_in) {
  const int64_t n = x.numel() / w.dim;
  const DType dt = w.activations;  // x (the residual stream) may be float32 all the same
  Tensor& h = ws.get(tag + ".norm", {n, w.dim}, dt);
  Tensor& qkv = ws.get(tag + ".qkv", {n, 3 * w.dim}, dt);
  Tensor& q = ws.get(tag + ".q", {n, w.dim}, dt);
  Tensor& k = ws.get(tag + ".k", {n, w.dim}, dt);
  Tensor& v = ws.get(tag + ".v", {n, w.dim}, dt);
  Tensor& attn = ws.get(tag + ".attn", {n, w.dim}, dt);
  Tensor& hidden = ws.get(tag + ".hidden", {n, w.hidden}, dt);

  const std::string& label = label_in.empty() ? tag : label_in;
  const auto sync = [&be] { be.synchronize(); };
  {
    ProfileScope p(label + ".qkv", sync);
    be.layer_norm(x, w.norm1_w, w.norm1_b, w.norm_eps, h);
    be.linear(h, *w.qkv_w, w.qkv_b, qkv);
    be.split_qkv(qkv, w.num_heads, w.head_dim, w.has_qk_norm ? &w.qk_norm : nullptr, rope, q, k, v);
  }
  {
    ProfileScope p(label + ".attention", sync);
    attend(q, k, v, attn);
  }
  {
    ProfileScope p(label + ".proj+mlp", sync);
    be.linear_residual(attn, *w.proj_w, w.proj_b, nullptr, x);
    be.layer_norm(x, w.norm2_w, w.norm2_b, w.norm_eps, h);
    be.linear(h, *w.fc1_w, w.fc1_b, hidden, Activation::Gelu);
    be.linear_residual(hidden, *w.fc2_w, w.fc2_b, nullptr, x);
  }
}

AttendFn attend_within_groups(Backend& be, int groups, int num_heads, int head_dim) {
  return [&be, groups, num_heads, head_dim](const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
    be.attention(q, k, v, groups, num_heads, head_dim, out);
  };
}

}  // namespace lingbot
