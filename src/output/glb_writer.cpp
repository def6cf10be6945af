#include "output/glb_writer.h"

#include "core/error.h"
#include "output/atomic_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace lingbot::io {

namespace {

constexpr int kFloat = 5126, kUnsignedByte = 5121, kUnsignedInt = 5125;      // accessor componentType
constexpr int kArrayBuffer = 34962, kElementArrayBuffer = 34963;             // bufferView target
constexpr int kPoints = 0, kLines = 1, kLineStrip = 3;                       // primitive mode

// The binary chunk and the JSON that describes it, grown together.
struct GltfBuilder {
  nlohmann::json doc;
  std::string bin;

  GltfBuilder() {
    doc["asset"] = {{"version", "2.0"}, {"generator", "lingbot-map export"}};
    doc["buffers"] = nlohmann::json::array();
    doc["bufferViews"] = nlohmann::json::array();
    doc["accessors"] = nlohmann::json::array();
    doc["meshes"] = nlohmann::json::array();
    doc["materials"] = nlohmann::json::array();
  }
  // A bufferView over `bytes` (4-byte aligned, as vertex attributes must be); returns its index.
  int view(const void* bytes, size_t size, int target) {
    while (bin.size() % 4) bin.push_back('\0');
    const size_t offset = bin.size();
    bin.append(static_cast<const char*>(bytes), size);
    doc["bufferViews"].push_back({{"buffer", 0}, {"byteOffset", offset}, {"byteLength", size}, {"target", target}});
    return static_cast<int>(doc["bufferViews"].size()) - 1;
  }
  int positions(const std::vector<float>& xyz) {
    std::array<float, 3> lo, hi;
    lo.fill(std::numeric_limits<float>::max());
    hi.fill(std::numeric_limits<float>::lowest());
    for (size_t i = 0; i < xyz.size(); ++i) {
      lo[i % 3] = std::min(lo[i % 3], xyz[i]);
      hi[i % 3] = std::max(hi[i % 3], xyz[i]);
    }
    const int v = view(xyz.data(), xyz.size() * sizeof(float), kArrayBuffer);
    doc["accessors"].push_back({{"bufferView", v}, {"componentType", kFloat}, {"count", xyz.size() / 3},
                                {"type", "VEC3"}, {"min", lo}, {"max", hi}});
    return static_cast<int>(doc["accessors"].size()) - 1;
  }
  int colors(const std::vector<uint8_t>& rgba) {
    const int v = view(rgba.data(), rgba.size(), kArrayBuffer);
    doc["accessors"].push_back({{"bufferView", v}, {"componentType", kUnsignedByte}, {"normalized", true},
                                {"count", rgba.size() / 4}, {"type", "VEC4"}});
    return static_cast<int>(doc["accessors"].size()) - 1;
  }
  int indices(const std::vector<uint32_t>& idx) {
    const int v = view(idx.data(), idx.size() * sizeof(uint32_t), kElementArrayBuffer);
    doc["accessors"].push_back({{"bufferView", v}, {"componentType", kUnsignedInt}, {"count", idx.size()},
                                {"type", "SCALAR"}});
    return static_cast<int>(doc["accessors"].size()) - 1;
  }
  // An unlit single-colour material for lines (KHR_materials_unlit is not needed: lines are not lit).
  int material(const char* name, std::array<double, 4> rgba) {
    doc["materials"].push_back({{"name", name}, {"pbrMetallicRoughness", {{"baseColorFactor", rgba},
                                                                          {"metallicFactor", 0.0}}}});
    return static_cast<int>(doc["materials"].size()) - 1;
  }
  int mesh(const char* name, nlohmann::json primitive) {
    doc["meshes"].push_back({{"name", name}, {"primitives", nlohmann::json::array({std::move(primitive)})}});
    return static_cast<int>(doc["meshes"].size()) - 1;
  }
};

void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }

}  // namespace

void write_glb(const Predictions& p, const std::vector<SelectedPoint>& points, const std::string& path) {
  GltfBuilder g;
  std::vector<int> meshes;

  // Scene size, for the frustums.
  std::array<double, 3> lo{1e300, 1e300, 1e300}, hi{-1e300, -1e300, -1e300};
  auto grow = [&](const double* q) {
    for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], q[a]), hi[a] = std::max(hi[a], q[a]);
  };
  for (const SelectedPoint& s : points) {
    const double q[3] = {s.xyz[0], s.xyz[1], s.xyz[2]};
    grow(q);
  }
  if (points.empty())
    for (int f = 0; f < p.frames; ++f) {
      const auto c2w = p.camera_to_world(f);
      const double q[3] = {c2w[0][3], c2w[1][3], c2w[2][3]};
      grow(q);
    }
  const double diagonal = lo[0] <= hi[0] ? std::hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]) : 0.0;
  const double frustum_depth = diagonal > 0 ? 0.05 * diagonal : 0.1;

  if (!points.empty()) {
    std::vector<float> xyz;
    std::vector<uint8_t> rgba;
    xyz.reserve(points.size() * 3);
    rgba.reserve(points.size() * 4);
    for (const SelectedPoint& s : points) {
      xyz.insert(xyz.end(), s.xyz, s.xyz + 3);
      rgba.insert(rgba.end(), {s.rgb[0], s.rgb[1], s.rgb[2], 255});
    }
    const int pos = g.positions(xyz), col = g.colors(rgba);
    meshes.push_back(g.mesh("points", {{"attributes", {{"POSITION", pos}, {"COLOR_0", col}}}, {"mode", kPoints}}));
  }
  if (p.frames > 0) {
    // Frustums: apex at the camera centre, the image corners at frustum_depth in front.
    std::vector<float> xyz;
    std::vector<uint32_t> idx;
    std::vector<float> path_xyz;
    for (int f = 0; f < p.frames; ++f) {
      const auto c2w = p.camera_to_world(f);
      const auto K = p.intrinsic_matrix(f);
      auto to_world = [&](double cx, double cy, double cz) {
        for (int r = 0; r < 3; ++r)
          xyz.push_back(static_cast<float>(c2w[r][0] * cx + c2w[r][1] * cy + c2w[r][2] * cz + c2w[r][3]));
      };
      const uint32_t base = static_cast<uint32_t>(xyz.size() / 3);
      to_world(0, 0, 0);
      const double corners[4][2] = {{0, 0}, {double(p.width), 0}, {double(p.width), double(p.height)},
                                    {0, double(p.height)}};
      for (const auto& c : corners) {
        // Pixel corners at -0.5 / W-0.5 in the model's integer-centred pixel coordinates.
        const double x = (c[0] - 0.5 - K[0][2]) / K[0][0], y = (c[1] - 0.5 - K[1][2]) / K[1][1];
        to_world(x * frustum_depth, y * frustum_depth, frustum_depth);
      }
      for (uint32_t k = 1; k <= 4; ++k) idx.insert(idx.end(), {base, base + k, base + k, base + (k % 4) + 1});
      for (int r = 0; r < 3; ++r) path_xyz.push_back(static_cast<float>(c2w[r][3]));
    }
    const int pos = g.positions(xyz), ind = g.indices(idx);
    const int frustum_material = g.material("cameras", {1.0, 0.25, 0.1, 1.0});
    meshes.push_back(g.mesh("cameras", {{"attributes", {{"POSITION", pos}}}, {"indices", ind},
                                        {"mode", kLines}, {"material", frustum_material}}));
    if (p.frames >= 2) {
      const int path_pos = g.positions(path_xyz);
      const int path_material = g.material("trajectory", {0.1, 0.5, 1.0, 1.0});
      meshes.push_back(g.mesh("trajectory", {{"attributes", {{"POSITION", path_pos}}}, {"mode", kLineStrip},
                                             {"material", path_material}}));
    }
  }
  if (g.doc["materials"].empty()) g.doc.erase("materials");
  if (g.doc["meshes"].empty()) g.doc.erase("meshes");

  nlohmann::json nodes = nlohmann::json::array();
  nlohmann::json children = nlohmann::json::array();
  for (size_t m = 0; m < meshes.size(); ++m) {
    nodes.push_back({{"mesh", meshes[m]}, {"name", g.doc["meshes"][meshes[m]]["name"]}});
    children.push_back(m + 1);
  }
  // OpenCV world (y down, z forward) -> glTF (y up, z toward the viewer): 180 degrees about x.
  nlohmann::json root = {{"name", "lingbot-map (OpenCV world, turned y-up)"}, {"rotation", {1.0, 0.0, 0.0, 0.0}}};
  if (!children.empty()) root["children"] = children;
  nodes.insert(nodes.begin(), root);
  g.doc["nodes"] = nodes;
  g.doc["scenes"] = nlohmann::json::array({{{"nodes", {0}}}});
  g.doc["scene"] = 0;
  while (g.bin.size() % 4) g.bin.push_back('\0');
  g.doc["buffers"].push_back({{"byteLength", g.bin.size()}});
  if (g.bin.empty()) {
    g.doc.erase("buffers");
    g.doc.erase("bufferViews");
    g.doc.erase("accessors");
  }

  std::string json = g.doc.dump();
  while (json.size() % 4) json.push_back(' ');  // the JSON chunk is padded with spaces
  const uint64_t total = 12 + 8 + json.size() + (g.bin.empty() ? 0 : 8 + g.bin.size());
  LB_CHECK(total <= 0xFFFFFFFFull, "{}: {} points make a glTF binary over 4 GB (its limit); use --voxel-size or "
           "--max-points", path, points.size());
  std::string glb;
  put_u32(glb, 0x46546C67);  // "glTF"
  put_u32(glb, 2);
  put_u32(glb, static_cast<uint32_t>(total));
  put_u32(glb, static_cast<uint32_t>(json.size()));
  put_u32(glb, 0x4E4F534A);  // "JSON"
  glb += json;
  if (!g.bin.empty()) {
    put_u32(glb, static_cast<uint32_t>(g.bin.size()));
    put_u32(glb, 0x004E4942);  // "BIN\0"
    glb += g.bin;
  }
  AtomicFile out(path);
  out.write(glb);
  out.commit();
}

}  // namespace lingbot::io
