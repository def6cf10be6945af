// A file that appears under its final name only when complete: written to a
// temporary name in the same folder and renamed into place by commit(), so a
// crash or a full disk never leaves a half-written file where a reader (COLMAP,
// a viewer, a later `export`) would take it for a finished one.
#pragma once

#include <cstdio>
#include <string>

namespace lingbot::io {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // throws "PATH: cannot create: ..."
  ~AtomicFile();                          // not committed: the temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  FILE* file() { return file_; }
  void write(const void* data, size_t bytes);
  void write(const std::string& text) { write(text.data(), text.size()); }
  void commit();  // flush, close, rename onto the final name; throws on any I/O error
  const std::string& path() const { return path_; }

 private:
  std::string path_, temp_path_;
  FILE* file_ = nullptr;
};

// Creates `dir` and any missing parents; throws "DIR: cannot create the folder: ..." on failure.
void make_dirs(const std::string& dir);

}  // namespace lingbot::io
