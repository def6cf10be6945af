#include "test_support.h"

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>

namespace lingbot::test {

std::string fixture_path(const std::string& name) { return std::string(LINGBOT_FIXTURES_DIR) + "/" + name; }

CommandResult run_shell(const std::string& command) {
  CommandResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

double relative_error(const Tensor& a, const Tensor& b) {
  LB_CHECK(a.numel() == b.numel(), "relative_error: {} vs {}", a.describe(), b.describe());
  const float* x = a.f32();
  const float* y = b.f32();
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = static_cast<double>(x[i]) - y[i];
    num += d * d;
    den += static_cast<double>(y[i]) * y[i];
  }
  if (std::isnan(num)) return INFINITY;
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  LB_CHECK(a.numel() == b.numel(), "max_abs_diff: {} vs {}", a.describe(), b.describe());
  const float* x = a.f32();
  const float* y = b.f32();
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

}  // namespace lingbot::test
