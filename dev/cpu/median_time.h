// The median wall time of a call, for the dev/cpu experiments: two calls
// to warm up, then `reps` timed ones.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

template <class F>
double median_ms(F&& fn, int reps = 7) {
  fn();
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
