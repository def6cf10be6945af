#include "backend/cpu/cpu_capacity.h"

#include <sched.h>

#include <thread>

namespace lingbot::cpu {

CpuCapacity cpu_capacity() {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());  // 0: unknown
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const int affinity = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : 0;  // 0: unknown
  CpuCapacity c;
  c.hardware_threads = hardware > 0 ? hardware : affinity > 0 ? affinity : 1;
  c.affinity_cpus = affinity > 0 ? affinity : c.hardware_threads;
  return c;
}

}  // namespace lingbot::cpu
