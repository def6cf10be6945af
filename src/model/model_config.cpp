#include "model/model_config.h"

#include "core/printable.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <utility>

namespace lingbot {

namespace {

using json = nlohmann::json;

// Reads one key's JSON value into its field; `source` and `key` name it in
// errors.
class FieldReader {
 public:
  FieldReader(const std::string& source, const std::string& key) : source_(source), key_(key) {}

  void read(const json& v, int& field) const {
    if (!v.is_number_integer()) wrong_type(v);
    try {
      field = v.get<int>();
    } catch (const json::exception&) {
      wrong_type(v);
    }
  }
  void read(const json& v, double& field) const {
    if (!v.is_number()) wrong_type(v);
    field = v.get<double>();
  }
  void read(const json& v, bool& field) const {
    if (!v.is_boolean()) wrong_type(v);
    field = v.get<bool>();
  }
  void read(const json& v, std::vector<int>& field) const {
    if (!v.is_array()) fail("{}: '{}' must be an array of integers", source_, key_);
    field.clear();
    for (const json& e : v) field.push_back(integer(e));
  }
  template <size_t N>
  void read(const json& v, std::array<int, N>& field) const {
    if (!v.is_array() || v.size() != N) fail("{}: '{}' must be an array of {} numbers", source_, key_, N);
    for (size_t i = 0; i < N; ++i) field[i] = integer(v[i]);
  }

 private:
  int integer(const json& e) const {
    if (!e.is_number_integer()) fail("{}: '{}' must hold integers", source_, key_);
    try {
      return e.get<int>();
    } catch (const json::exception&) {
      fail("{}: '{}' must hold integers", source_, key_);
    }
  }
  [[noreturn]] void wrong_type(const json& v) const {
    fail("{}: '{}' has the wrong type ({})", source_, key_, v.type_name());
  }

  const std::string& source_;
  const std::string& key_;
};

// "encoder.depth" -> {"encoder", "depth"}; "depth" -> {"", "depth"}.
std::pair<std::string, std::string> split_key(const std::string& key) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) return {"", key};
  return {key.substr(0, dot), key.substr(dot + 1)};
}

}  // namespace

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond a double (1e309).
    fail("{}: not valid JSON ({})", source, e.what());
  }
  if (!doc.is_object()) fail("{}: the config must be a JSON object", source);
  ModelConfig c;
  std::set<std::string> known(kIgnoredConfigKeys.begin(), kIgnoredConfigKeys.end());
  std::set<std::string> objects;  // "encoder", ...
  for_each_config_key(c, [&](const std::string& key, auto& field) {
    known.insert(key);
    const auto [object, name] = split_key(key);
    const json* parent = &doc;
    if (!object.empty()) {
      objects.insert(object);
      auto it = doc.find(object);
      if (it == doc.end()) return;  // missing: keep the official values
      if (!it->is_object()) fail("{}: '{}' must be a JSON object", source, object);
      parent = &*it;
    }
    auto it = parent->find(name);
    if (it == parent->end()) return;  // missing: keep the official value
    FieldReader(source, key).read(*it, field);
  });
  // Anything not in the list is a typo or a key of another program.
  auto reject_unknown = [&](const json& obj, const std::string& prefix) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string key = prefix + it.key();
      if (!known.count(key) && !(prefix.empty() && objects.count(key)))
        fail("{}: unknown key '{}' (see docs/model-config.md for the keys)", source, io::printable(key));
    }
  };
  for (const std::string& object : objects)
    if (auto it = doc.find(object); it != doc.end()) reject_unknown(*it, object + ".");
  reject_unknown(doc, "");
  c.validate(source);
  return c;
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open model config", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), path);
}

void ModelConfig::validate(const std::string& source) const {
  auto need = [&](bool ok, const std::string& problem) {
    if (!ok) fail("{}: {}", source, problem);
  };
  need(patch_size > 0 && img_size >= patch_size, fmt::format("img_size {} / patch_size {} do not make a patch grid", img_size,
       patch_size));
  need(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, fmt::format("embed_dim {} is not divisible by num_heads {}", embed_dim, num_heads));
  need(head_dim() % 4 == 0, fmt::format("head_dim {} must be a multiple of 4 for the 2D RoPE", head_dim()));
  need(depth > 0, fmt::format("depth must be positive, got {}", depth));
  need(mlp_ratio > 0, fmt::format("mlp_ratio must be positive"));
  need(num_register_tokens >= 0, fmt::format("num_register_tokens must be >= 0"));
  need(encoder.embed_dim == embed_dim, fmt::format("encoder.embed_dim {} must equal embed_dim {} (encoder tokens feed the aggregator)",
       encoder.embed_dim, embed_dim));
  need(encoder.depth > 0 && encoder.num_heads > 0 && encoder.embed_dim % encoder.num_heads == 0, fmt::format("encoder sizes do not describe a transformer (depth {}, heads {}, dim {})", encoder.depth, encoder.num_heads,
       encoder.embed_dim));
  need(encoder.num_register_tokens >= 0, fmt::format("encoder.num_register_tokens must be >= 0"));
  need(aggregator_output_layers.size() == 4, fmt::format("aggregator_output_layers needs 4 entries for the DPT head, got {}",
       aggregator_output_layers.size()));
  for (size_t i = 0; i < aggregator_output_layers.size(); ++i) {
    const int l = aggregator_output_layers[i];
    need(l >= 0 && l < depth, fmt::format("aggregator_output_layers[{}] = {} is outside 0..{}", i, l, depth - 1));
    need(i == 0 || l > aggregator_output_layers[i - 1], fmt::format("aggregator_output_layers must be increasing"));
  }
  if (enable_3d_rope) {
    const int sum = rope3d_fhw_dim[0] + rope3d_fhw_dim[1] + rope3d_fhw_dim[2];
    need(sum == head_dim(), fmt::format("rope3d_fhw_dim sums to {}, head_dim is {}", sum, head_dim()));
    for (int d : rope3d_fhw_dim) need(d > 0 && d % 2 == 0, fmt::format("rope3d_fhw_dim entries must be positive and even"));
  }
  need(rope_freq > 0 && rope3d_theta > 0, fmt::format("RoPE frequencies must be positive"));
  need(kv_cache_sliding_window >= 1, fmt::format("kv_cache_sliding_window must be >= 1, got {}", kv_cache_sliding_window));
  need(kv_cache_scale_frames >= 0, fmt::format("kv_cache_scale_frames must be >= 0"));
  need(camera_num_iterations >= 1, fmt::format("camera_num_iterations must be >= 1"));
  need(num_scale_frames >= 1, fmt::format("num_scale_frames must be >= 1"));
  need(camera_head.dim == 2 * embed_dim, fmt::format("camera_head.dim {} must be 2 * embed_dim = {}", camera_head.dim,
       2 * embed_dim));
  need(camera_head.trunk_depth > 0 && camera_head.num_heads > 0 && camera_head.dim % camera_head.num_heads == 0, fmt::format("camera_head sizes do not describe a transformer"));
  need(camera_head.dim % 2 == 0, fmt::format("camera_head.dim must be even"));
  need(depth_head.features > 1 && depth_head.features % 2 == 0, fmt::format("depth_head.features must be even"));
  for (int oc : depth_head.out_channels) need(oc > 0, fmt::format("depth_head.out_channels must be positive"));
}

std::string ModelConfig::to_json() const {
  json j = json::object();
  for_each_config_key(*this, [&](const std::string& key, const auto& field) {
    const auto [object, name] = split_key(key);
    (object.empty() ? j : j[object])[name] = field;
  });
  return j.dump(2);
}

// ---------------------------------------------------------------------------
// Expected parameters, mirroring upstream's module tree (state-dict names).
// ---------------------------------------------------------------------------
namespace {

struct Lister {
  std::vector<ExpectedTensor> out;
  void add(std::string name, Shape shape) { out.push_back({std::move(name), std::move(shape)}); }
  void layer_norm(const std::string& p, int64_t dim) {
    add(p + ".weight", {dim});
    add(p + ".bias", {dim});
  }
  void linear(const std::string& p, int64_t out_f, int64_t in_f) {
    add(p + ".weight", {out_f, in_f});
    add(p + ".bias", {out_f});
  }
  // Upstream's Block / CameraBlock: norm1, attn (qkv, [q_norm, k_norm], proj),
  // ls1, norm2, mlp (fc1, fc2), ls2 — in that registration order.
  void block(const std::string& p, int64_t dim, int64_t heads, double mlp_ratio, bool qk_norm) {
    const int64_t hidden = static_cast<int64_t>(dim * mlp_ratio);
    layer_norm(p + ".norm1", dim);
    linear(p + ".attn.qkv", 3 * dim, dim);
    if (qk_norm) {
      layer_norm(p + ".attn.q_norm", dim / heads);
      layer_norm(p + ".attn.k_norm", dim / heads);
    }
    linear(p + ".attn.proj", dim, dim);
    add(p + ".ls1.gamma", {dim});
    layer_norm(p + ".norm2", dim);
    linear(p + ".mlp.fc1", hidden, dim);
    linear(p + ".mlp.fc2", dim, hidden);
    add(p + ".ls2.gamma", {dim});
  }
  void conv(const std::string& p, int64_t out_c, int64_t in_c, int64_t k, bool bias = true) {
    add(p + ".weight", {out_c, in_c, k, k});
    if (bias) add(p + ".bias", {out_c});
  }
};

}  // namespace

std::vector<ExpectedTensor> expected_parameters(const ModelConfig& c) {
  Lister l;
  const int64_t E = c.embed_dim;
  const int64_t grid = c.img_size / c.patch_size;

  // aggregator.patch_embed: DINOv2 (cls, pos, registers, mask, stem, blocks, norm).
  const std::string enc = "aggregator.patch_embed";
  l.add(enc + ".cls_token", {1, 1, E});
  l.add(enc + ".pos_embed", {1, grid * grid + 1, E});
  if (c.encoder.num_register_tokens > 0) l.add(enc + ".register_tokens", {1, c.encoder.num_register_tokens, E});
  l.add(enc + ".mask_token", {1, E});
  l.conv(enc + ".patch_embed.proj", E, 3, c.patch_size);
  for (int i = 0; i < c.encoder.depth; ++i)
    l.block(fmt::format("{}.blocks.{}", enc, i), E, c.encoder.num_heads, c.encoder.mlp_ratio, false);
  l.layer_norm(enc + ".norm", E);

  // aggregator: frame blocks, global blocks, special tokens.
  for (int i = 0; i < c.depth; ++i)
    l.block(fmt::format("aggregator.frame_blocks.{}", i), E, c.num_heads, c.mlp_ratio, c.qk_norm);
  for (int i = 0; i < c.depth; ++i)
    l.block(fmt::format("aggregator.global_blocks.{}", i), E, c.num_heads, c.mlp_ratio, c.qk_norm);
  l.add("aggregator.camera_token", {1, 2, 1, E});
  if (c.num_register_tokens > 0) l.add("aggregator.register_token", {1, 2, c.num_register_tokens, E});
  l.add("aggregator.scale_token", {1, 2, 1, E});

  // camera_head: CameraCausalHead.
  const int64_t C = c.camera_head.dim;
  for (int i = 0; i < c.camera_head.trunk_depth; ++i)
    l.block(fmt::format("camera_head.trunk.{}", i), C, c.camera_head.num_heads, c.camera_head.mlp_ratio, false);
  l.layer_norm("camera_head.token_norm", C);
  l.layer_norm("camera_head.trunk_norm", C);
  l.add("camera_head.empty_pose_tokens", {1, 1, 9});
  l.linear("camera_head.embed_pose", C, 9);
  l.linear("camera_head.poseLN_modulation.1", 3 * C, C);
  l.linear("camera_head.pose_branch.fc1", C / 2, C);
  l.linear("camera_head.pose_branch.fc2", 9, C / 2);

  // depth_head: DPTHead.
  const auto& oc = c.depth_head.out_channels;
  const int64_t F = c.depth_head.features;
  l.layer_norm("depth_head.norm", 2 * E);
  for (int i = 0; i < 4; ++i) l.conv(fmt::format("depth_head.projects.{}", i), oc[i], 2 * E, 1);
  // ConvTranspose2d weights are [in, out, k, k].
  l.add("depth_head.resize_layers.0.weight", {oc[0], oc[0], 4, 4});
  l.add("depth_head.resize_layers.0.bias", {oc[0]});
  l.add("depth_head.resize_layers.1.weight", {oc[1], oc[1], 2, 2});
  l.add("depth_head.resize_layers.1.bias", {oc[1]});
  l.conv("depth_head.resize_layers.3", oc[3], oc[3], 3);
  for (int i = 0; i < 4; ++i) l.conv(fmt::format("depth_head.scratch.layer{}_rn", i + 1), F, oc[i], 3, false);
  for (int r = 1; r <= 4; ++r) {
    const std::string p = fmt::format("depth_head.scratch.refinenet{}", r);
    l.conv(p + ".out_conv", F, F, 1);
    if (r != 4) {
      l.conv(p + ".resConfUnit1.conv1", F, F, 3);
      l.conv(p + ".resConfUnit1.conv2", F, F, 3);
    }
    l.conv(p + ".resConfUnit2.conv1", F, F, 3);
    l.conv(p + ".resConfUnit2.conv2", F, F, 3);
  }
  l.conv("depth_head.scratch.output_conv1", F / 2, F, 3);
  l.conv("depth_head.scratch.output_conv2.0", 32, F / 2, 3);
  l.conv("depth_head.scratch.output_conv2.2", 2, 32, 1);
  return std::move(l.out);
}

}  // namespace lingbot
