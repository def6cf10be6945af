// What `run` leaves in --out, written as a transaction (issue #22):
//   predictions.npz, trajectory.txt, points.ply (dense runs), manifest.json
// * DIR/.lingbot.lock (output_lock.h) keeps a second run out while this one
//   writes; temporaries a dead run left behind are removed when it is taken;
// * every file grows under a temporary name unique to this run
//   (.lingbot-<pid>-<random>-<name>) and is renamed into place only when
//   complete, so an earlier run's files stay whole until replaced and a
//   failure (a full disk, a signal, an error) leaves them as they were;
// * finish() also removes the final files of an earlier run that this run
//   does not write (points.ply after a --no-dense re-run, or anything the
//   earlier manifest.json lists), saying so, and writes manifest.json: which
//   run wrote what;
// * disk: the spools are moved into predictions.npz back to front
//   (npz_writer.h), points.ply is written in place: at the end the disk
//   holds the outputs plus at most one chunk (one frame of the largest
//   array, at least 1 MiB) more.
// * --export (settings.exports): the formats are written into DIR while the
//   frames stream, by io::StreamingExporter (output/stream_exporter.h) fed
//   the same float values predictions.npz gets and the sky-masked
//   confidence, so `export DIR --format F` on the finished npz writes the
//   same files. Per-frame files appear as each frame is added; the rest in
//   finish(), after predictions.npz and manifest.json. A run stopped by a
//   signal still finishes them for the frames done, as it does the npz.
#pragma once

#include "model/streaming_model.h"
#include "output/exporters.h"
#include "output/npz_writer.h"
#include "output/output_lock.h"
#include "output/point_cloud_writer.h"
#include "output/sky_masks.h"
#include "output/stream_exporter.h"
#include "output/trajectory_writer.h"
#include "video/frame_source.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lingbot {

struct RunOutputSettings {
  std::string dir;  // --out, made and checked by the caller
  int height = 0, width = 0;
  bool dense = true;
  double conf_threshold = 1.5;
  std::vector<std::string> command_line;  // for the manifest
  std::string sky_masks;                  // a folder of masks applied to points.ply, or empty
  bool frame_types = false;               // a per-frame uint8 `frame_type` array (windowed mode, as upstream)
  std::optional<io::ExportOptions> exports;  // --export, written as frames stream (out_dir: DIR)
  // Per frame in input order, what exported files are named after
  // (io::export_names of every input name, so two inputs a.png and a.jpg
  // keep their extensions, as `export` names them); empty: each name alone.
  std::vector<std::string> export_names;
};

class RunOutputs {
 public:
  explicit RunOutputs(RunOutputSettings settings);  // takes the lock; opens the temporaries
  ~RunOutputs();  // unfinished: removes every temporary; releases the lock
  RunOutputs(const RunOutputs&) = delete;
  RunOutputs& operator=(const RunOutputs&) = delete;

  // One finished frame. `name`: the frame's input name for predictions.npz's
  // `frames` (the file's name, or NNNNNN for a video).
  void add(const FrameResult& r, const video::Frame& frame, const std::string& name);
  // With settings.frame_types: the frame's type, once per add(), for `frame_type`.
  void add_frame_type(uint8_t type);

  int64_t frames() const { return static_cast<int64_t>(names_.size()); }
  int64_t points() const { return ply_ ? ply_->points() : 0; }

  // Completes every file and renames it into place, removes stale files of
  // an earlier run, writes manifest.json. `interrupted_by`: a signal's name,
  // or empty. `extra`: whole arrays known only at the end (e.g. windowed
  // mode's chunk_scales), appended to predictions.npz. Returns the names
  // written, for the log.
  // Then finishes the --export formats (export_summary()).
  std::vector<std::string> finish(const std::string& interrupted_by, std::vector<io::NpzMember> extra = {});

  // After finish() with settings.exports.
  const io::ExportSummary& export_summary() const { return export_summary_; }

 private:
  std::string temp(const std::string& name);  // a registered temporary in dir
  void drop_temporaries();

  RunOutputSettings s_;
  std::string run_id_, started_;
  io::OutputLock lock_;
  std::optional<io::SkyMasks> sky_masks_;
  std::vector<std::string> temporaries_;
  std::vector<std::pair<std::string, std::string>> finals_;  // temporary -> final name, in renaming order
  std::unique_ptr<io::ArraySpool> pose_enc_, extrinsic_, intrinsic_, depth_, depth_conf_, points_, images_, frame_type_;
  std::unique_ptr<io::PlyWriter> ply_;
  std::unique_ptr<io::TumTrajectoryWriter> trajectory_;
  std::unique_ptr<io::StreamingExporter> exporter_;
  io::ExportSummary export_summary_;
  std::vector<std::string> names_;
  std::vector<float> conf_;  // one frame's confidence, sky-masked, for points.ply
  bool finished_ = false;
};

}  // namespace lingbot
