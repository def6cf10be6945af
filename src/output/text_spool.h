// Parts of a file written as they become known and put into the file at the
// end: the per-frame entries of transforms.json and COLMAP's cameras file,
// whose headers (a count, an enclosing array) need the whole stream. The
// spool is a temporary file beside the final one, registered with
// temporary_files.h so a second Ctrl-C removes it too; it goes when the
// spool does.
#pragma once

#include "output/atomic_file.h"

#include <cstdio>
#include <string>

namespace lingbot::io {

class TextSpool {
 public:
  explicit TextSpool(const std::string& final_path);  // throws "FINAL_PATH: cannot create: ..."
  ~TextSpool();
  TextSpool(const TextSpool&) = delete;
  TextSpool& operator=(const TextSpool&) = delete;

  void append(const std::string& bytes);
  // Everything appended, copied to the end of `out`.
  void copy_into(AtomicFile& out);
  int64_t entries() const { return entries_; }  // append() calls

 private:
  std::string final_path_, path_;
  FILE* file_ = nullptr;
  int64_t entries_ = 0;
};

}  // namespace lingbot::io
