#include "model/model_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

namespace lingbot {

namespace {

using json = nlohmann::json;

// Reads keys of one JSON object into fields, remembering which keys were
// consumed so that anything left over is reported as unknown.
class ObjectReader {
 public:
  ObjectReader(const json& obj, std::string source, std::string path)
      : obj_(obj), source_(std::move(source)), path_(std::move(path)) {
    if (!obj_.is_object()) fail("{}: '{}' must be a JSON object", source_, display(""));
  }

  template <typename T>
  void read(const char* key, T& field) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end()) return;  // missing: keep the official value
    try {
      check_type<T>(*it, key);
      field = it->template get<T>();
    } catch (const json::exception&) {
      fail("{}: '{}' has the wrong type ({})", source_, display(key), it->type_name());
    }
  }

  template <typename T, size_t N>
  void read_array(const char* key, std::array<T, N>& field) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end()) return;
    if (!it->is_array() || it->size() != N)
      fail("{}: '{}' must be an array of {} numbers", source_, display(key), N);
    for (size_t i = 0; i < N; ++i) {
      if (!(*it)[i].is_number_integer()) fail("{}: '{}' must hold integers", source_, display(key));
      field[i] = (*it)[i].template get<T>();
    }
  }

  void read_vector(const char* key, std::vector<int>& field) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end()) return;
    if (!it->is_array()) fail("{}: '{}' must be an array of integers", source_, display(key));
    field.clear();
    for (const auto& v : *it) {
      if (!v.is_number_integer()) fail("{}: '{}' must hold integers", source_, display(key));
      field.push_back(v.get<int>());
    }
  }

  const json* child(const char* key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }

  void reject_unknown() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (!seen_.count(it.key()))
        fail("{}: unknown key '{}' (see docs/model-config.md for the keys)", source_, display(it.key()));
    }
  }

 private:
  template <typename T>
  void check_type(const json& v, const char* key) const {
    bool ok = true;
    if constexpr (std::is_same_v<T, bool>) ok = v.is_boolean();
    else if constexpr (std::is_integral_v<T>) ok = v.is_number_integer();
    else if constexpr (std::is_floating_point_v<T>) ok = v.is_number();
    if (!ok) fail("{}: '{}' has the wrong type ({})", source_, display(key), v.type_name());
  }
  std::string display(const std::string& key) const {
    if (path_.empty()) return key;
    return key.empty() ? path_ : path_ + "." + key;
  }

  const json& obj_;
  std::string source_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{}: not valid JSON ({})", source, e.what());
  }
  ModelConfig c;
  ObjectReader r(doc, source, "");
  r.read("img_size", c.img_size);
  r.read("patch_size", c.patch_size);
  r.read("embed_dim", c.embed_dim);
  r.read("depth", c.depth);
  r.read("num_heads", c.num_heads);
  r.read("mlp_ratio", c.mlp_ratio);
  r.read("num_register_tokens", c.num_register_tokens);
  r.read("qk_norm", c.qk_norm);
  r.read("rope_freq", c.rope_freq);
  r.read("enable_3d_rope", c.enable_3d_rope);
  r.read("max_frame_num", c.max_frame_num);
  r.read_vector("aggregator_output_layers", c.aggregator_output_layers);
  r.read_array("rope3d_fhw_dim", c.rope3d_fhw_dim);
  r.read("rope3d_theta", c.rope3d_theta);
  r.read("kv_cache_sliding_window", c.kv_cache_sliding_window);
  r.read("kv_cache_scale_frames", c.kv_cache_scale_frames);
  r.read("kv_cache_cross_frame_special", c.kv_cache_cross_frame_special);
  r.read("kv_cache_include_scale_frames", c.kv_cache_include_scale_frames);
  r.read("kv_cache_camera_only", c.kv_cache_camera_only);
  r.read("camera_num_iterations", c.camera_num_iterations);
  r.read("num_scale_frames", c.num_scale_frames);
  if (const json* e = r.child("encoder")) {
    ObjectReader er(*e, source, "encoder");
    er.read("embed_dim", c.encoder.embed_dim);
    er.read("depth", c.encoder.depth);
    er.read("num_heads", c.encoder.num_heads);
    er.read("mlp_ratio", c.encoder.mlp_ratio);
    er.read("num_register_tokens", c.encoder.num_register_tokens);
    er.reject_unknown();
  }
  if (const json* h = r.child("camera_head")) {
    ObjectReader hr(*h, source, "camera_head");
    hr.read("dim", c.camera_head.dim);
    hr.read("trunk_depth", c.camera_head.trunk_depth);
    hr.read("num_heads", c.camera_head.num_heads);
    hr.read("mlp_ratio", c.camera_head.mlp_ratio);
    hr.reject_unknown();
  }
  if (const json* d = r.child("depth_head")) {
    ObjectReader dr(*d, source, "depth_head");
    dr.read("features", c.depth_head.features);
    dr.read_array("out_channels", c.depth_head.out_channels);
    dr.reject_unknown();
  }
  r.reject_unknown();
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
  json j;
  j["img_size"] = img_size;
  j["patch_size"] = patch_size;
  j["embed_dim"] = embed_dim;
  j["depth"] = depth;
  j["num_heads"] = num_heads;
  j["mlp_ratio"] = mlp_ratio;
  j["num_register_tokens"] = num_register_tokens;
  j["qk_norm"] = qk_norm;
  j["rope_freq"] = rope_freq;
  j["enable_3d_rope"] = enable_3d_rope;
  j["max_frame_num"] = max_frame_num;
  j["aggregator_output_layers"] = aggregator_output_layers;
  j["rope3d_fhw_dim"] = rope3d_fhw_dim;
  j["rope3d_theta"] = rope3d_theta;
  j["kv_cache_sliding_window"] = kv_cache_sliding_window;
  j["kv_cache_scale_frames"] = kv_cache_scale_frames;
  j["kv_cache_cross_frame_special"] = kv_cache_cross_frame_special;
  j["kv_cache_include_scale_frames"] = kv_cache_include_scale_frames;
  j["kv_cache_camera_only"] = kv_cache_camera_only;
  j["camera_num_iterations"] = camera_num_iterations;
  j["num_scale_frames"] = num_scale_frames;
  j["encoder"] = {{"embed_dim", encoder.embed_dim}, {"depth", encoder.depth}, {"num_heads", encoder.num_heads},
                  {"mlp_ratio", encoder.mlp_ratio}, {"num_register_tokens", encoder.num_register_tokens}};
  j["camera_head"] = {{"dim", camera_head.dim}, {"trunk_depth", camera_head.trunk_depth},
                      {"num_heads", camera_head.num_heads}, {"mlp_ratio", camera_head.mlp_ratio}};
  j["depth_head"] = {{"features", depth_head.features}, {"out_channels", depth_head.out_channels}};
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
