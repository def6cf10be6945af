#include "app/run_outputs.h"

#include "core/error.h"
#include "core/log.h"
#include "output/atomic_file.h"
#include "output/temporary_files.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

namespace lingbot {

namespace {

namespace fs = std::filesystem;

constexpr const char* kTempPrefix = ".lingbot-";
constexpr const char* kManifest = "manifest.json";
// The final files a run may write; one an earlier run left that this run
// does not write is removed (with the earlier manifest's list).
const std::vector<std::string>& run_file_names() {
  static const std::vector<std::string> names = {"predictions.npz", "trajectory.txt", "points.ply"};
  return names;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string new_run_id() {
  std::random_device random;
  return fmt::format("{}-{:08x}", getpid(), random());
}

// Temporaries of runs that died without cleaning up (SIGKILL, power loss):
// we hold the lock, so no live run owns them.
void remove_dead_runs_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kTempPrefix, 0) != 0 || !e.is_regular_file()) continue;
    log_info("--out {}: removing {}, a temporary file an interrupted run left", dir, name);
    fs::remove(e.path(), ec);
  }
}

// Files the earlier run's manifest says it wrote.
std::vector<std::string> files_in_manifest(const std::string& dir) {
  std::ifstream in(dir + "/" + kManifest);
  if (!in) return {};
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> files;
  if (!m.is_object() || !m.contains("files") || !m["files"].is_array()) return files;
  for (const auto& f : m["files"])
    if (f.is_object() && f.contains("name") && f["name"].is_string()) files.push_back(f["name"].get<std::string>());
  return files;
}

}  // namespace

RunOutputs::RunOutputs(RunOutputSettings settings)
    : s_(std::move(settings)), run_id_(new_run_id()), started_(utc_now()), lock_(s_.dir, "--out") {
  if (lock_.stale_pid() != 0)
    log_info("--out {}: took over the lock of run {}, which is no longer running", s_.dir, lock_.stale_pid());
  remove_dead_runs_temporaries(s_.dir);
  if (!s_.sky_masks.empty()) sky_masks_.emplace(s_.sky_masks);
  try {
    const int H = s_.height, W = s_.width;
    pose_enc_ = std::make_unique<io::ArraySpool>("pose_enc", DType::F32, Shape{9}, temp("pose_enc"));
    extrinsic_ = std::make_unique<io::ArraySpool>("extrinsic", DType::F32, Shape{3, 4}, temp("extrinsic"));
    intrinsic_ = std::make_unique<io::ArraySpool>("intrinsic", DType::F32, Shape{3, 3}, temp("intrinsic"));
    if (s_.frame_types) frame_type_ = std::make_unique<io::ArraySpool>("frame_type", DType::U8, Shape{}, temp("frame_type"));
    if (s_.dense) {
      depth_ = std::make_unique<io::ArraySpool>("depth", DType::F32, Shape{H, W, 1}, temp("depth"));
      depth_conf_ = std::make_unique<io::ArraySpool>("depth_conf", DType::F32, Shape{H, W}, temp("depth_conf"));
      points_ = std::make_unique<io::ArraySpool>("world_points", DType::F32, Shape{H, W, 3}, temp("world_points"));
      images_ = std::make_unique<io::ArraySpool>("images", DType::F32, Shape{3, H, W}, temp("images"));
      const std::string ply = temp("points.ply");
      ply_ = std::make_unique<io::PlyWriter>(ply);
      finals_.emplace_back(ply, "points.ply");
    }
    const std::string trajectory = temp("trajectory.txt");
    trajectory_ = std::make_unique<io::TumTrajectoryWriter>(trajectory);
    finals_.emplace_back(trajectory, "trajectory.txt");
    // predictions.npz last: its presence says the run's other files are in place too.
    finals_.emplace_back(temp("predictions.npz"), "predictions.npz");
    if (s_.exports) {
      LB_CHECK(s_.dense, "--export needs the depth and points that --no-dense leaves out");
      exporter_ = std::make_unique<io::StreamingExporter>(*s_.exports, H, W);
    }
  } catch (...) {
    drop_temporaries();
    throw;
  }
}

RunOutputs::~RunOutputs() {
  if (finished_) return;
  // The writers close (and PlyWriter removes) their files before the unlinks.
  pose_enc_.reset();
  extrinsic_.reset();
  intrinsic_.reset();
  depth_.reset();
  depth_conf_.reset();
  points_.reset();
  images_.reset();
  frame_type_.reset();
  ply_.reset();
  trajectory_.reset();
  drop_temporaries();
}

std::string RunOutputs::temp(const std::string& name) {
  const std::string path = s_.dir + "/" + kTempPrefix + run_id_ + "-" + name;
  io::register_temporary(path);
  temporaries_.push_back(path);
  return path;
}

void RunOutputs::drop_temporaries() {
  for (const std::string& path : temporaries_) {
    std::remove(path.c_str());
    io::unregister_temporary(path);
  }
  temporaries_.clear();
}

void RunOutputs::add(const FrameResult& r, const video::Frame& source_frame, const std::string& name) {
  const Tensor& frame = source_frame.image;
  Tensor pe = Tensor::from_vector(std::vector<float>(r.pose_enc.begin(), r.pose_enc.end()), {9});
  pose_enc_->append(pe);
  Tensor ext = Tensor::empty({3, 4}), intr = Tensor::empty({3, 3});
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) ext.f32()[i * 4 + j] = static_cast<float>(r.camera.camera_to_world[i][j]);
    for (int j = 0; j < 3; ++j) intr.f32()[i * 3 + j] = static_cast<float>(r.camera.intrinsic[i][j]);
  }
  extrinsic_->append(ext);
  intrinsic_->append(intr);
  trajectory_->add(source_frame.timestamp, r.camera.camera_to_world);
  names_.push_back(name);
  if (!ply_) return;
  const int H = s_.height, W = s_.width;
  depth_->append(r.depth.reshape({H, W, 1}));
  depth_conf_->append(r.depth_conf);  // as the model gave it: sky masks are applied by readers
  points_->append(r.world_points);
  images_->append(frame);
  const int64_t plane = static_cast<int64_t>(H) * W;
  conf_.assign(r.depth_conf.f32(), r.depth_conf.f32() + plane);
  if (sky_masks_) sky_masks_->zero_sky_confidence(name, conf_.data(), W, H);
  if (exporter_) {
    const size_t index = names_.size() - 1;
    const std::string export_name =
        index < s_.export_names.size() ? s_.export_names[index] : io::export_names({name}).front();
    // The float values predictions.npz holds, so `export` of it writes the same.
    exporter_->add({export_name, ext.f32(), intr.f32(), r.depth.f32(), conf_.data(), r.world_points.f32(),
                    frame.f32()});
  }
  for (int64_t p = 0; p < plane; ++p) {
    if (!(conf_[static_cast<size_t>(p)] > s_.conf_threshold)) continue;
    const float* xyz = r.world_points.f32() + 3 * p;
    auto c = [&](int ch) {
      return static_cast<uint8_t>(std::lround(std::clamp(frame.f32()[ch * plane + p], 0.0f, 1.0f) * 255.0f));
    };
    ply_->add(xyz[0], xyz[1], xyz[2], c(0), c(1), c(2));
  }
}

void RunOutputs::add_frame_type(uint8_t type) {
  LB_CHECK(frame_type_, "RunOutputs: add_frame_type() without settings.frame_types");
  Tensor t = Tensor::empty({}, DType::U8);
  t.data_as<uint8_t>()[0] = type;
  frame_type_->append(t);
}

std::vector<std::string> RunOutputs::finish(const std::string& interrupted_by, std::vector<io::NpzMember> extra) {
  trajectory_->close();
  if (ply_) ply_->finish();
  std::vector<io::NpzMember> members;
  for (io::ArraySpool* spool : {pose_enc_.get(), depth_.get(), depth_conf_.get(), points_.get(), extrinsic_.get(),
                                intrinsic_.get(), images_.get(), frame_type_.get()})
    if (spool) members.push_back({spool->name(), spool, {}});
  members.push_back({"frames", nullptr, io::npy_strings(names_)});
  for (io::NpzMember& m : extra) members.push_back(std::move(m));
  const std::string& npz = finals_.back().first;
  io::write_npz_moving_spools(npz, members, s_.dir + "/predictions.npz");
  for (auto* spool : {&pose_enc_, &extrinsic_, &intrinsic_, &depth_, &depth_conf_, &points_, &images_, &frame_type_})
    spool->reset();  // empty now; their files go

  // Everything is complete: into place. The earlier manifest goes first, so a
  // failure from here on leaves none rather than one describing other files.
  std::set<std::string> earlier(run_file_names().begin(), run_file_names().end());
  for (const std::string& f : files_in_manifest(s_.dir)) earlier.insert(f);
  std::remove((s_.dir + "/" + kManifest).c_str());
  std::vector<std::string> written;
  for (const auto& [from, to] : finals_) {
    const std::string target = s_.dir + "/" + to;
    if (std::rename(from.c_str(), target.c_str()) != 0)
      fail("{}: cannot rename into place: {}", target, std::strerror(errno));
    io::unregister_temporary(from);
    written.push_back(to);
  }
  finished_ = true;
  drop_temporaries();  // the spools' (already removed) and any other left

  for (const std::string& f : earlier) {
    if (std::find(written.begin(), written.end(), f) != written.end() || f.find('/') != std::string::npos ||
        f.rfind(".", 0) == 0)
      continue;
    std::error_code ec;
    if (fs::remove(s_.dir + "/" + f, ec))
      log_info("--out {}: removed {}, written by an earlier run; this run does not write it", s_.dir, f);
  }

  nlohmann::ordered_json manifest;
  manifest["run_id"] = run_id_;
  manifest["started"] = started_;
  manifest["finished"] = utc_now();
  manifest["command_line"] = s_.command_line;
  manifest["frames"] = frames();
  manifest["interrupted_by"] = interrupted_by.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(interrupted_by);
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const std::string& f : written) {
    std::error_code ec;
    files.push_back({{"name", f}, {"bytes", static_cast<int64_t>(fs::file_size(s_.dir + "/" + f, ec))}});
  }
  manifest["files"] = files;
  io::AtomicFile out(s_.dir + "/" + kManifest);
  out.write(manifest.dump(2) + "\n");
  out.commit();
  // After the run's own files: --export ply's points.ply (the export's point
  // selection) replaces the run's, as `export` into the same folder would.
  if (exporter_) export_summary_ = exporter_->finish();
  return written;
}

}  // namespace lingbot
