// How many threads this process can run at once, for capping --threads.
#pragma once

namespace lingbot::cpu {

struct CpuCapacity {
  int hardware_threads = 1;  // std::thread::hardware_concurrency: the machine's, whatever this process may use
  int affinity_cpus = 1;     // CPUs in this process's affinity mask (taskset, a container's cpuset)
  // The smaller of the two: more threads than this only take turns.
  int usable() const { return hardware_threads < affinity_cpus ? hardware_threads : affinity_cpus; }
};

// Never fails: a count the system does not give is taken as the other one.
CpuCapacity cpu_capacity();

}  // namespace lingbot::cpu
